import React, { ChangeEvent } from 'react';
import { DataSourcePluginOptionsEditorProps } from '@grafana/data';
import { FieldSet, InlineField, Input, SecretInput } from '@grafana/ui';

import { TierscopeOptions, TierscopeSecureJsonData } from '../types';

type Props = DataSourcePluginOptionsEditorProps<TierscopeOptions, TierscopeSecureJsonData>;

const LABEL_WIDTH = 20;

/** The API's URL and timeout, and its bearer token, which Grafana keeps encrypted. */
export function ConfigEditor({ options, onOptionsChange }: Props) {
  const { jsonData, secureJsonFields } = options;
  const secureJsonData = (options.secureJsonData ?? {}) as TierscopeSecureJsonData;

  return (
    <FieldSet label="Tierscope perfmodel exporter">
      <InlineField
        label="URL"
        labelWidth={LABEL_WIDTH}
        tooltip="The exporter's HTTP API root, e.g. http://perfmodel:8790"
        htmlFor="tierscope-url"
        required
      >
        <Input
          id="tierscope-url"
          data-testid="tierscope-url"
          width={40}
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
          width={40}
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
    </FieldSet>
  );
}
