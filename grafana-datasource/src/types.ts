import { DataSourceJsonData } from '@grafana/data';
import { DataQuery } from '@grafana/schema';

/** Query types, one per model of the perfmodel exporter; pkg/plugin/query.go lists the same. */
export enum QueryType {
  Paths = 'paths',
  Graph = 'graph',
  WorkFactors = 'workfactors',
  Signatures = 'signatures',
  Compare = 'compare',
  Gradients = 'gradients',
  Experiments = 'experiments',
  Predict = 'predict',
  Profile = 'profile',
  Spectrum = 'spectrum',
  Latency = 'latency',
}

export interface QueryTypeInfo {
  value: QueryType;
  label: string;
  description: string;
}

export const QUERY_TYPES: QueryTypeInfo[] = [
  { value: QueryType.Paths, label: 'Paths', description: 'Causal path patterns as a node graph and a table' },
  { value: QueryType.Graph, label: 'Service graph', description: 'Services and links, with a transaction’s link gradients' },
  { value: QueryType.WorkFactors, label: 'Work factors', description: 'Megacycles per request of each flow over time' },
  { value: QueryType.Signatures, label: 'Signatures', description: 'Load-independent service time per version' },
  { value: QueryType.Compare, label: 'Compare', description: 'A candidate version’s signature against a base version' },
  { value: QueryType.Gradients, label: 'Gradients', description: 'Measured response-time gradients with confidence intervals' },
  { value: QueryType.Experiments, label: 'Experiments', description: 'Gradient experiments and their progress' },
  { value: QueryType.Predict, label: 'What-if', description: 'Predicted response times after latency, frequency or capacity changes' },
  { value: QueryType.Profile, label: 'Profiles', description: 'Signature profiles: front latency against CPU utilization' },
  { value: QueryType.Spectrum, label: 'Spectrum', description: 'An experiment’s baseline spectrum, injection frequency and progress' },
  { value: QueryType.Latency, label: 'Latency', description: 'Each service’s latency (mean, p50, p99) and requests over time' },
];

/** One what-if change: +delta to a link's latency (ms), a machine's frequency (MHz) or capacity (cores). */
export interface WhatIfChange {
  element: string;
  delta: number;
}

export interface TierscopeQuery extends DataQuery {
  queryType?: QueryType;
  service?: string;
  top?: number;
  transaction?: string;
  machine?: string;
  version?: string;
  baseVersion?: string;
  candidateVersion?: string;
  element?: string;
  changes?: WhatIfChange[];
  /** The experiment whose spectrum is shown; the newest when empty. */
  experiment?: string;
}

export const DEFAULT_QUERY: Partial<TierscopeQuery> = {
  queryType: QueryType.Paths,
  top: 10,
};

/** jsonData of the datasource; the URL is the datasource's own url field. */
export type TracesDatasourceType = 'tempo' | 'jaeger';

export interface TierscopeOptions extends DataSourceJsonData {
  timeoutSeconds?: number;
  /** A Tempo or Jaeger datasource the service graph links to. */
  tracesDatasourceUid?: string;
  tracesDatasourceType?: TracesDatasourceType;
}

/** secureJsonData: stored encrypted by Grafana, only ever sent to the backend. */
export interface TierscopeSecureJsonData {
  apiToken?: string;
}

/** A dropdown entry as served by the backend's resources. */
export interface ResourceOption {
  label: string;
  value: string;
  description?: string;
}

/** The unit of a what-if change's delta, by element kind. */
export function deltaUnit(element: string): string {
  if (element.startsWith('frequency:')) {
    return 'MHz';
  }
  if (element.startsWith('capacity:')) {
    return 'cores';
  }
  return 'ms';
}

/** Which editor fields a query type uses. */
export const FIELDS_BY_TYPE: Record<QueryType, Array<keyof TierscopeQuery>> = {
  [QueryType.Paths]: ['service', 'top'],
  [QueryType.Graph]: ['transaction'],
  [QueryType.WorkFactors]: ['machine'],
  [QueryType.Signatures]: ['service', 'version'],
  [QueryType.Compare]: ['service', 'baseVersion', 'candidateVersion'],
  [QueryType.Gradients]: ['transaction', 'element'],
  [QueryType.Experiments]: [],
  [QueryType.Predict]: ['changes'],
  [QueryType.Profile]: ['service', 'version', 'transaction'],
  [QueryType.Spectrum]: ['experiment'],
  [QueryType.Latency]: ['service'],
};
