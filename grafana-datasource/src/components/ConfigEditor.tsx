import React, { ChangeEvent } from 'react';
import { DataSourcePluginOptionsEditorProps } from '@grafana/data';
import { FieldSet, InlineField, Input, RadioButtonGroup, SecretInput } from '@grafana/ui';

import { TierscopeOptions, TierscopeSecureJsonData, TracesDatasourceType } from '../types';

type Props = DataSourcePluginOptionsEditorProps<TierscopeOptions, TierscopeSecureJsonData>;

const LABEL_WIDTH = 16;

const TRACES_TYPES: Array<{ label: string; value: TracesDatasourceType }> = [
  { label: 'Tempo', value: 'tempo' },
  { label: 'Jaeger', value: 'jaeger' },
];

/** The API's URL and timeout, and its bearer token, which Grafana keeps encrypted. */
export function ConfigEditor({ options, onOptionsChange }: Props) {
  const { jsonData, secureJsonFields } = options;
  const secureJsonData = (options.secureJsonData ?? {}) as TierscopeSecureJsonData;

  return (
    <FieldSet label="Tierscope perfmodel exporter">
      <InlineField
        label="URL"
        labelWidth={LABEL_WIDTH}
        tooltip="Where the exporter listens, e.g. http://perfmodel:8790 (with or without /api/v1)"
        htmlFor="tierscope-url"
        required
      >
        <Input
          id="tierscope-url"
          data-testid="tierscope-url"
          width={30}
          placeholder="http://localhost:8790"
          value={options.url ?? ''}
          onChange={(e: ChangeEvent<HTMLInputElement>) => onOptionsChange({ ...options, url: e.currentTarget.value })}
        />
      </InlineField>
      <InlineField
        label="API token"
        labelWidth={LABEL_WIDTH}
        tooltip="Sent as Authorization: Bearer <token>; leave empty when the API has no authentication"
        htmlFor="tierscope-token"
      >
        <SecretInput
          id="tierscope-token"
          data-testid="tierscope-token"
          width={30}
          placeholder="bearer token"
          isConfigured={Boolean(secureJsonFields?.apiToken)}
          value={secureJsonData.apiToken ?? ''}
          onReset={() =>
            onOptionsChange({
              ...options,
              secureJsonFields: { ...secureJsonFields, apiToken: false },
              secureJsonData: { ...secureJsonData, apiToken: '' },
            })
          }
          onChange={(e: ChangeEvent<HTMLInputElement>) =>
            onOptionsChange({ ...options, secureJsonData: { ...secureJsonData, apiToken: e.currentTarget.value } })
          }
        />
      </InlineField>
      <InlineField label="Timeout (s)" labelWidth={LABEL_WIDTH} tooltip="Per API call; 30 s when empty" htmlFor="tierscope-timeout">
        <Input
          id="tierscope-timeout"
          data-testid="tierscope-timeout"
          type="number"
          min={1}
          width={12}
          placeholder="30"
          value={jsonData.timeoutSeconds ?? ''}
          onChange={(e: ChangeEvent<HTMLInputElement>) => {
            const seconds = parseInt(e.currentTarget.value, 10);
            onOptionsChange({
              ...options,
              jsonData: { ...jsonData, timeoutSeconds: Number.isFinite(seconds) && seconds > 0 ? seconds : undefined },
            });
          }}
        />
      </InlineField>
      <InlineField
        label="Trace links"
        labelWidth={LABEL_WIDTH}
        tooltip="UID of a Tempo or Jaeger datasource: the service graph's nodes and edges link to their traces there"
        htmlFor="tierscope-traces-uid"
      >
        <Input
          id="tierscope-traces-uid"
          data-testid="tierscope-traces-uid"
          width={24}
          placeholder="datasource UID"
          value={jsonData.tracesDatasourceUid ?? ''}
          onChange={(e: ChangeEvent<HTMLInputElement>) => {
            const uid = e.currentTarget.value.trim();
            onOptionsChange({
              ...options,
              jsonData: {
                ...jsonData,
                tracesDatasourceUid: uid || undefined,
                tracesDatasourceType: uid ? (jsonData.tracesDatasourceType ?? 'tempo') : undefined,
              },
            });
          }}
        />
      </InlineField>
      {jsonData.tracesDatasourceUid && (
        <InlineField label="Traces type" labelWidth={LABEL_WIDTH} tooltip="How trace queries are written">
          <RadioButtonGroup<TracesDatasourceType>
            options={TRACES_TYPES}
            value={jsonData.tracesDatasourceType ?? 'tempo'}
            onChange={(value) => onOptionsChange({ ...options, jsonData: { ...jsonData, tracesDatasourceType: value } })}
          />
        </InlineField>
      )}
    </FieldSet>
  );
}
