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

  it('feeds dashboard variables from the catalog, with a service and the time range', async () => {
    const ds = newDataSource();
    const getResource = jest
      .spyOn(ds, 'getResource')
      .mockResolvedValue([{ label: 'v1', value: 'v1' }, { label: 'v2', value: 'v2' }]);
    const range = { from: { valueOf: () => 1700000000000 }, to: { valueOf: () => 1700003600500 } };
    await expect(ds.metricFindQuery('versions $svc', { range } as never)).resolves.toEqual([
      { text: 'v1', value: 'v1' },
      { text: 'v2', value: 'v2' },
    ]);
    expect(getResource).toHaveBeenCalledWith('versions', { service: 'checkout', from: '1700000000', to: '1700003601' });

    getResource.mockResolvedValue([{ label: 'app → db', value: 'link:app->db' }]);
    await expect(ds.metricFindQuery('links')).resolves.toEqual([{ text: 'link:app->db', value: 'link:app->db' }]);
    expect(getResource).toHaveBeenLastCalledWith('links', {});

    await ds.metricFindQuery('services versioned');
    expect(getResource).toHaveBeenLastCalledWith('services', { versioned: 'true' });
    await expect(ds.metricFindQuery('services web')).rejects.toThrow('"services" takes only "versioned"');
    await expect(ds.metricFindQuery('hosts')).rejects.toThrow('unknown Tierscope variable query "hosts"');
    await expect(ds.metricFindQuery('versions')).rejects.toThrow('"versions" needs a service');
  });
});
