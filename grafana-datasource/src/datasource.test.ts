import { DataSourceInstanceSettings, ScopedVars } from '@grafana/data';

import { DataSource } from './datasource';
import { QueryType, TierscopeOptions, TierscopeQuery } from './types';

const replace = jest.fn((value: string, _vars?: ScopedVars) => value.replace('$svc', 'checkout').replace('$link', 'link:app->db'));

jest.mock('@grafana/runtime', () => {
  const actual = jest.requireActual('@grafana/runtime');
  return { ...actual, getTemplateSrv: () => ({ replace }) };
});

function newDataSource(): DataSource {
  const settings = {
    id: 1,
    uid: 'tierscope',
    type: 'tierscope-perfmodel-datasource',
    name: 'Tierscope',
    jsonData: {},
    meta: {},
    access: 'proxy',
  } as unknown as DataSourceInstanceSettings<TierscopeOptions>;
  return new DataSource(settings);
}

describe('DataSource', () => {
  it('defaults to the paths query', () => {
    expect(newDataSource().getDefaultQuery('explore' as never)).toEqual({ queryType: QueryType.Paths, top: 10 });
  });

  it('replaces dashboard variables in filters and what-if elements', () => {
    const query: TierscopeQuery = {
      refId: 'A',
      queryType: QueryType.Predict,
      service: '$svc',
      changes: [{ element: '$link', delta: 20 }],
    };
    const replaced = newDataSource().applyTemplateVariables(query, {});
    expect(replaced.service).toBe('checkout');
    expect(replaced.changes).toEqual([{ element: 'link:app->db', delta: 20 }]);
    expect(query.service).toBe('$svc');
  });

  it('skips hidden queries', () => {
    const ds = newDataSource();
    expect(ds.filterQuery({ refId: 'A', hide: true })).toBe(false);
    expect(ds.filterQuery({ refId: 'A' })).toBe(true);
  });

  it('asks the backend resources for dropdown options, narrowed by service', async () => {
    const ds = newDataSource();
    const getResource = jest
      .spyOn(ds, 'getResource')
      .mockResolvedValue([{ label: 'GET /checkout', value: 'GET /checkout' }]);
    await expect(ds.listOptions('transactions', 'frontend')).resolves.toEqual([
      { label: 'GET /checkout', value: 'GET /checkout' },
    ]);
    expect(getResource).toHaveBeenCalledWith('transactions', { service: 'frontend' });

    getResource.mockResolvedValue({ error: 'not a list' });
    await expect(ds.listOptions('services')).resolves.toEqual([]);
    expect(getResource).toHaveBeenLastCalledWith('services', {});
  });
});
