import React, { useState } from 'react';
import { fireEvent, render, screen } from '@testing-library/react';
import { DataSourceSettings } from '@grafana/data';

import { TierscopeOptions, TierscopeSecureJsonData } from '../types';
import { ConfigEditor } from './ConfigEditor';

type Settings = DataSourceSettings<TierscopeOptions, TierscopeSecureJsonData>;

function settings(overrides: Partial<Settings> = {}): Settings {
  return {
    id: 1,
    uid: 'tierscope',
    orgId: 1,
    name: 'Tierscope',
    type: 'tierscope-perfmodel-datasource',
    typeName: 'Tierscope perfmodel',
    typeLogoUrl: '',
    access: 'proxy',
    url: '',
    user: '',
    database: '',
    basicAuth: false,
    basicAuthUser: '',
    isDefault: false,
    jsonData: {},
    secureJsonFields: {},
    readOnly: false,
    withCredentials: false,
    ...overrides,
  } as Settings;
}

function renderConfig(initial: Settings) {
  const changes: Settings[] = [];
  function Harness() {
    const [options, setOptions] = useState(initial);
    return (
      <ConfigEditor
        options={options}
        onOptionsChange={(o) => {
          changes.push(o);
          setOptions(o);
        }}
      />
    );
  }
  render(<Harness />);
  return changes;
}

describe('ConfigEditor', () => {
  it('stores the URL and timeout in the settings and the token in secureJsonData', () => {
    const changes = renderConfig(settings());
    fireEvent.change(screen.getByTestId('tierscope-url'), { target: { value: 'http://perfmodel:8790' } });
    fireEvent.change(screen.getByTestId('tierscope-token'), { target: { value: 's3cret' } });
    fireEvent.change(screen.getByTestId('tierscope-timeout'), { target: { value: '12' } });

    const last = changes.at(-1)!;
    expect(last.url).toBe('http://perfmodel:8790');
    expect(last.secureJsonData).toEqual({ apiToken: 's3cret' });
    expect(last.jsonData).toEqual({ timeoutSeconds: 12 });
    expect(JSON.stringify(last.jsonData)).not.toContain('s3cret');
  });

  it('shows a stored token as configured and can reset it', () => {
    const changes = renderConfig(settings({ url: 'http://x', secureJsonFields: { apiToken: true } }));
    expect(screen.getByDisplayValue('configured')).toBeDisabled();
    fireEvent.click(screen.getByRole('button', { name: 'Reset' }));
    expect(changes.at(-1)?.secureJsonFields).toEqual({ apiToken: false });
    expect(changes.at(-1)?.secureJsonData).toEqual({ apiToken: '' });
  });

  it('keeps a traces datasource for the service graph links, Tempo unless Jaeger is chosen', () => {
    const changes = renderConfig(settings({ url: 'http://x' }));
    expect(screen.queryByRole('radio', { name: 'Jaeger' })).toBeNull();
    fireEvent.change(screen.getByTestId('tierscope-traces-uid'), { target: { value: ' tempo-1 ' } });
    expect(changes.at(-1)?.jsonData).toEqual({ tracesDatasourceUid: 'tempo-1', tracesDatasourceType: 'tempo' });
    fireEvent.click(screen.getByRole('radio', { name: 'Jaeger' }));
    expect(changes.at(-1)?.jsonData).toEqual({ tracesDatasourceUid: 'tempo-1', tracesDatasourceType: 'jaeger' });
    fireEvent.change(screen.getByTestId('tierscope-traces-uid'), { target: { value: '' } });
    expect(changes.at(-1)?.jsonData).toEqual({});
  });
});
