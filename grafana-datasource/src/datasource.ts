import {
  CoreApp,
  DataSourceInstanceSettings,
  LegacyMetricFindQueryOptions,
  MetricFindValue,
  ScopedVars,
} from '@grafana/data';
import { DataSourceWithBackend, getTemplateSrv } from '@grafana/runtime';

import { DEFAULT_QUERY, ResourceOption, TierscopeOptions, TierscopeQuery } from './types';

type Resource = 'services' | 'transactions' | 'versions' | 'links' | 'machines';

const RESOURCES: Resource[] = ['services', 'transactions', 'versions', 'links', 'machines'];

/** The syntax of a dashboard variable's query, shown when it is wrong. */
export const VARIABLE_QUERY_HELP =
  'services [versioned] | transactions [SERVICE] | versions SERVICE | links | machines (SERVICE may be a variable, e.g. $service)';

const TEMPLATED_FIELDS = [
  'service',
  'transaction',
  'machine',
  'version',
  'baseVersion',
  'candidateVersion',
  'element',
  'experiment',
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
  async listOptions(
    resource: Resource,
    service?: string,
    range?: { from: number; to: number },
    versioned?: boolean
  ): Promise<ResourceOption[]> {
    const params: Record<string, string> = {};
    if (service) {
      params.service = service;
    }
    if (versioned) {
      params.versioned = 'true';
    }
    if (range) {
      params.from = String(Math.floor(range.from / 1000));
      params.to = String(Math.ceil(range.to / 1000));
    }
    const options = await this.getResource<ResourceOption[]>(resource, params);
    return Array.isArray(options) ? options : [];
  }

  /**
   * Dashboard variables fed from the catalog: the query is a resource name,
   * for transactions and versions followed by a service ("versions $service").
   */
  async metricFindQuery(query: unknown, options?: LegacyMetricFindQueryOptions): Promise<MetricFindValue[]> {
    const raw = typeof query === 'string' ? query : ((query as { query?: string } | undefined)?.query ?? '');
    const text = getTemplateSrv().replace(raw, options?.scopedVars).trim();
    const [name, ...rest] = text.split(/\s+/);
    const resource = RESOURCES.find((r) => r === name);
    if (!resource) {
      throw new Error(`unknown Tierscope variable query "${text}"; use ${VARIABLE_QUERY_HELP}`);
    }
    const argument = rest.join(' ');
    if (resource === 'versions' && !argument) {
      throw new Error(`"versions" needs a service; use ${VARIABLE_QUERY_HELP}`);
    }
    if (resource === 'services' && argument && argument !== 'versioned') {
      throw new Error(`"services" takes only "versioned"; use ${VARIABLE_QUERY_HELP}`);
    }
    const range = options?.range ? { from: options.range.from.valueOf(), to: options.range.to.valueOf() } : undefined;
    const found =
      resource === 'services'
        ? await this.listOptions(resource, undefined, range, argument === 'versioned')
        : await this.listOptions(resource, argument || undefined, range);
    return found.map((o) => ({ text: o.value, value: o.value }));
  }
}
