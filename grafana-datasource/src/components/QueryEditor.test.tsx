import React, { useState } from 'react';
import { act, fireEvent, render, screen, waitFor } from '@testing-library/react';

import { DataSource } from '../datasource';
import { QueryType, ResourceOption, TierscopeQuery } from '../types';
import { isRunnable, QueryEditor } from './QueryEditor';

const CATALOG: Record<string, ResourceOption[]> = {
  services: [{ label: 'frontend', value: 'frontend' }],
  transactions: [{ label: 'GET /checkout', value: 'GET /checkout' }],
  versions: [{ label: 'v1', value: 'v1' }],
  links: [{ label: 'app → db', value: 'link:app->db' }],
  machines: [{ label: 'host-a', value: 'host-a' }],
};

function fakeDataSource(fail = false): DataSource {
  return {
    listOptions: jest.fn((resource: string) =>
      fail ? Promise.reject({ data: { error: 'authentication failed (HTTP 401)' } }) : Promise.resolve(CATALOG[resource])
    ),
  } as unknown as DataSource;
}

/** Holds the query like Grafana does, and records every change. */
function Harness(props: { initial: TierscopeQuery; datasource: DataSource; changes: TierscopeQuery[]; runs: jest.Mock }) {
  const [query, setQuery] = useState(props.initial);
  return (
    <QueryEditor
      query={query}
      datasource={props.datasource}
      onChange={(q) => {
        props.changes.push(q);
        setQuery(q);
      }}
      onRunQuery={props.runs}
    />
  );
}

async function renderEditor(initial: TierscopeQuery, datasource = fakeDataSource()) {
  const changes: TierscopeQuery[] = [];
  const runs = jest.fn();
  await act(async () => {
    render(<Harness initial={initial} datasource={datasource} changes={changes} runs={runs} />);
  });
  return { changes, runs, datasource };
}

describe('QueryEditor', () => {
  it('shows the filters of the chosen query type and switches type', async () => {
    const { changes, runs } = await renderEditor({ refId: 'A', queryType: QueryType.Paths, top: 10 });
    expect(screen.getByTestId('tierscope-top')).toHaveValue(10);
    expect(screen.getByText('Causal path patterns as a node graph and a table')).toBeInTheDocument();
    expect(screen.queryByTestId('tierscope-whatif')).not.toBeInTheDocument();

    fireEvent.click(screen.getByLabelText('Compare'));
    expect(changes.at(-1)?.queryType).toBe(QueryType.Compare);
    // A comparison without its versions is not run.
    expect(runs).not.toHaveBeenCalled();
    expect(screen.getByTestId('tierscope-query-description')).toHaveTextContent('candidate version');
    expect(screen.getByText('Base version')).toBeInTheDocument();
    expect(screen.queryByTestId('tierscope-top')).not.toBeInTheDocument();

    fireEvent.click(screen.getByLabelText('Experiments'));
    expect(changes.at(-1)?.queryType).toBe(QueryType.Experiments);
    expect(runs).toHaveBeenCalledTimes(1);
  });

  it('commits the top patterns on blur', async () => {
    const { changes, runs } = await renderEditor({ refId: 'A', queryType: QueryType.Paths, top: 10 });
    const top = screen.getByTestId('tierscope-top');
    fireEvent.change(top, { target: { value: '25' } });
    fireEvent.blur(top);
    expect(changes.at(-1)?.top).toBe(25);
    expect(runs).toHaveBeenCalled();
  });

  it('edits what-if changes: add, set the delta, remove', async () => {
    const { changes, runs } = await renderEditor({ refId: 'A', queryType: QueryType.Predict });
    expect(screen.getByText(/No change yet/)).toBeInTheDocument();

    fireEvent.click(screen.getByRole('button', { name: /Add change/ }));
    expect(changes.at(-1)?.changes).toEqual([{ element: '', delta: 0 }]);
    expect(runs).not.toHaveBeenCalled();

    const delta = screen.getByTestId('tierscope-change-delta-0');
    fireEvent.change(delta, { target: { value: '20' } });
    fireEvent.blur(delta);
    expect(changes.at(-1)?.changes).toEqual([{ element: '', delta: 20 }]);
    expect(screen.getByText('+ ms')).toBeInTheDocument();

    fireEvent.click(screen.getByRole('button', { name: /Add change/ }));
    expect(changes.at(-1)?.changes).toHaveLength(2);
    fireEvent.click(screen.getByRole('button', { name: 'Remove change 1' }));
    expect(changes.at(-1)?.changes).toEqual([{ element: '', delta: 0 }]);
  });

  it('loads the catalog for the dropdowns, following the service', async () => {
    const { datasource } = await renderEditor({ refId: 'A', queryType: QueryType.Signatures, service: 'frontend' });
    expect(datasource.listOptions).toHaveBeenCalledWith('services');
    expect(datasource.listOptions).toHaveBeenCalledWith('transactions', 'frontend');
    expect(datasource.listOptions).toHaveBeenCalledWith('versions', 'frontend');
    expect(screen.getByTestId('tierscope-service')).toHaveValue('frontend');
  });

  it('says why the catalog is missing', async () => {
    await renderEditor({ refId: 'A', queryType: QueryType.Graph }, fakeDataSource(true));
    await waitFor(() => expect(screen.getByText('authentication failed (HTTP 401)')).toBeInTheDocument());
  });
});

describe('isRunnable', () => {
  it('needs both versions to compare and an element to predict', () => {
    expect(isRunnable({ refId: 'A', queryType: QueryType.Compare, service: 's', baseVersion: 'a' })).toBe(false);
    expect(
      isRunnable({ refId: 'A', queryType: QueryType.Compare, service: 's', baseVersion: 'a', candidateVersion: 'b' })
    ).toBe(true);
    expect(isRunnable({ refId: 'A', queryType: QueryType.Predict, changes: [{ element: '', delta: 1 }] })).toBe(false);
    expect(isRunnable({ refId: 'A', queryType: QueryType.Predict, changes: [{ element: 'link:a->b', delta: 1 }] })).toBe(
      true
    );
    expect(isRunnable({ refId: 'A', queryType: QueryType.Paths })).toBe(true);
  });
});
