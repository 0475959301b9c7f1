import { CoreApp, DataSourceInstanceSettings, ScopedVars } from '@grafana/data';
import { DataSourceWithBackend, getTemplateSrv } from '@grafana/runtime';

import { DEFAULT_QUERY, ResourceOption, TierscopeOptions, TierscopeQuery } from './types';

type Resource = 'services' | 'transactions' | 'versions' | 'links' | 'machines';

const TEMPLATED_FIELDS = [
  'service',
  'transaction',
  'machine',
  'version',
  'baseVersion',
  'candidateVersion',
  'element',
] as const;

export class DataSource extends DataSourceWithBackend<TierscopeQuery, TierscopeOptions> {
  constructor(instanceSettings: DataSourceInstanceSettings<TierscopeOptions>) {
    super(instanceSettings);
  }

  getDefaultQuery(_: CoreApp): Partial<TierscopeQuery> {
    return DEFAULT_QUERY;
  }

  /** Dashboard variables may stand in any text filter and in what-if elements. */
  applyTemplateVariables(query: TierscopeQuery, scopedVars: ScopedVars): TierscopeQuery {
    const templateSrv = getTemplateSrv();
    const replaced: TierscopeQuery = { ...query };
    for (const field of TEMPLATED_FIELDS) {
      const value = query[field];
      if (value) {
        replaced[field] = templateSrv.replace(value, scopedVars);
      }
    }
    if (query.changes) {
      replaced.changes = query.changes.map((change) => ({
        ...change,
        element: templateSrv.replace(change.element, scopedVars),
      }));
    }
    return replaced;
  }

  filterQuery(query: TierscopeQuery): boolean {
    return !query.hide;
  }

  /** Options for an editor dropdown, from the backend's catalog resources. */
  async listOptions(resource: Resource, service?: string): Promise<ResourceOption[]> {
    const params: Record<string, string> = {};
    if (service) {
      params.service = service;
    }
    const options = await this.getResource<ResourceOption[]>(resource, params);
    return Array.isArray(options) ? options : [];
  }
}
