import { DataSourcePlugin } from '@grafana/data';

import { ConfigEditor } from './components/ConfigEditor';
import { QueryEditor } from './components/QueryEditor';
import { DataSource } from './datasource';
import { TierscopeOptions, TierscopeQuery } from './types';

export const plugin = new DataSourcePlugin<DataSource, TierscopeQuery, TierscopeOptions>(DataSource)
  .setConfigEditor(ConfigEditor)
  .setQueryEditor(QueryEditor);
