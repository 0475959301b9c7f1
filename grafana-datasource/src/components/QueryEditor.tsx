import React, { ChangeEvent, useEffect, useMemo, useState } from 'react';
import { css } from '@emotion/css';
import { QueryEditorProps } from '@grafana/data';
import {
  Alert,
  Button,
  Combobox,
  ComboboxOption,
  IconButton,
  InlineField,
  InlineFieldRow,
  Input,
  RadioButtonGroup,
  Stack,
} from '@grafana/ui';

import { DataSource } from '../datasource';
import {
  DEFAULT_QUERY,
  deltaUnit,
  FIELDS_BY_TYPE,
  QUERY_TYPES,
  QueryType,
  ResourceOption,
  TierscopeOptions,
  TierscopeQuery,
  WhatIfChange,
} from '../types';

type Props = QueryEditorProps<DataSource, TierscopeQuery, TierscopeOptions>;

const LABEL_WIDTH = 16;
// Dropdowns size to their value between these widths (in grid units of 8 px),
// so that a label and its field fit a narrow query pane (about 400 px).
const INPUT_MIN_WIDTH = 16;
const INPUT_MAX_WIDTH = 30;

// The query types wrap onto more lines when the pane is too narrow for one.
const wrappingRadios = css({ flexWrap: 'wrap', height: 'auto', rowGap: 2 });

interface Catalog {
  services: ResourceOption[];
  transactions: ResourceOption[];
  versions: ResourceOption[];
  links: ResourceOption[];
  machines: ResourceOption[];
}

const EMPTY_CATALOG: Catalog = { services: [], transactions: [], versions: [], links: [], machines: [] };

function toComboboxOptions(options: ResourceOption[]): Array<ComboboxOption<string>> {
  return options.map((o) => ({ label: o.label, value: o.value, description: o.description }));
}

/** Loads the dropdowns' options; transactions and versions follow the chosen service. */
function useCatalog(datasource: DataSource, service: string | undefined): { catalog: Catalog; error?: string } {
  const [catalog, setCatalog] = useState<Catalog>(EMPTY_CATALOG);
  const [error, setError] = useState<string>();

  useEffect(() => {
    let cancelled = false;
    Promise.all([
      datasource.listOptions('services'),
      datasource.listOptions('transactions', service),
      datasource.listOptions('versions', service),
      datasource.listOptions('links'),
      datasource.listOptions('machines'),
    ])
      .then(([services, transactions, versions, links, machines]) => {
        if (!cancelled) {
          setCatalog({ services, transactions, versions, links, machines });
          setError(undefined);
        }
      })
      .catch((err: unknown) => {
        if (!cancelled) {
          setError(describeError(err));
        }
      });
    return () => {
      cancelled = true;
    };
  }, [datasource, service]);

  return { catalog, error };
}

function describeError(err: unknown): string {
  if (err && typeof err === 'object') {
    const withData = err as { data?: { error?: string; message?: string }; message?: string };
    return withData.data?.error ?? withData.data?.message ?? withData.message ?? 'unknown error';
  }
  return String(err);
}

interface TextChoiceProps {
  label: string;
  tooltip: string;
  field: keyof TierscopeQuery;
  value?: string;
  options: ResourceOption[];
  placeholder: string;
  onChange: (field: keyof TierscopeQuery, value: string | undefined) => void;
}

/** A dropdown that also accepts a value not in the catalog (e.g. a template variable). */
function TextChoice({ label, tooltip, field, value, options, placeholder, onChange }: TextChoiceProps) {
  const id = `tierscope-${String(field)}`;
  return (
    <InlineField label={label} labelWidth={LABEL_WIDTH} tooltip={tooltip} htmlFor={id}>
      <Combobox<string>
        id={id}
        data-testid={id}
        width="auto"
        minWidth={INPUT_MIN_WIDTH}
        maxWidth={INPUT_MAX_WIDTH}
        placeholder={placeholder}
        options={toComboboxOptions(options)}
        value={value ?? null}
        createCustomValue
        isClearable
        onChange={(option) => onChange(field, option?.value || undefined)}
      />
    </InlineField>
  );
}

export function QueryEditor({ query, onChange, onRunQuery, datasource }: Props) {
  const queryType = query.queryType ?? DEFAULT_QUERY.queryType ?? QueryType.Paths;
  const fields = FIELDS_BY_TYPE[queryType] ?? [];
  const { catalog, error } = useCatalog(datasource, query.service);
  const changes = useMemo(() => query.changes ?? [], [query.changes]);

  const update = (next: TierscopeQuery, run = true) => {
    onChange(next);
    if (run && isRunnable(next)) {
      onRunQuery();
    }
  };

  const setField = (field: keyof TierscopeQuery, value: string | undefined) => {
    update({ ...query, [field]: value });
  };

  const setChanges = (next: WhatIfChange[], run = true) => update({ ...query, changes: next }, run);

  const elementOptions = useMemo<ResourceOption[]>(
    () => [
      ...catalog.links,
      ...catalog.machines.map((m) => ({ label: `frequency of ${m.label}`, value: `frequency:${m.value}` })),
      ...catalog.machines.map((m) => ({ label: `capacity of ${m.label}`, value: `capacity:${m.value}` })),
    ],
    [catalog.links, catalog.machines]
  );

  const description = QUERY_TYPES.find((t) => t.value === queryType)?.description;

  return (
    <Stack direction="column" gap={1}>
      <InlineFieldRow>
        <InlineField label="Query type" labelWidth={LABEL_WIDTH} tooltip={description} shrink>
          <RadioButtonGroup<QueryType>
            className={wrappingRadios}
            options={QUERY_TYPES.map(({ value, label, description }) => ({ value, label, description }))}
            value={queryType}
            onChange={(value) => update({ ...query, queryType: value })}
          />
        </InlineField>
      </InlineFieldRow>
      <div data-testid="tierscope-query-description">{description}</div>

      {error && (
        <Alert severity="warning" title="The catalog could not be loaded">
          {error}
        </Alert>
      )}

      <InlineFieldRow>
        {fields.includes('service') && (
          <TextChoice
            label="Service"
            tooltip="Only this service (all when empty)"
            field="service"
            value={query.service}
            options={catalog.services}
            placeholder="all services"
            onChange={setField}
          />
        )}
        {fields.includes('top') && (
          <InlineField label="Top patterns" labelWidth={LABEL_WIDTH} tooltip="How many of the most frequent patterns">
            <Input
              id="tierscope-top"
              data-testid="tierscope-top"
              type="number"
              min={1}
              width={12}
              defaultValue={query.top ?? ''}
              onBlur={(e: React.FocusEvent<HTMLInputElement>) => {
                const top = parseInt(e.currentTarget.value, 10);
                update({ ...query, top: Number.isFinite(top) && top > 0 ? top : undefined });
              }}
            />
          </InlineField>
        )}
        {fields.includes('transaction') && (
          <TextChoice
            label="Transaction"
            tooltip={
              queryType === QueryType.Graph
                ? 'Show this transaction’s link gradients on the edges'
                : queryType === QueryType.Profile
                  ? 'Only this transaction’s profile'
                  : 'Only gradients of this transaction'
            }
            field="transaction"
            value={query.transaction}
            options={catalog.transactions}
            placeholder="choose a transaction"
            onChange={setField}
          />
        )}
        {fields.includes('machine') && (
          <TextChoice
            label="Machine"
            tooltip="Only this machine (all when empty)"
            field="machine"
            value={query.machine}
            options={catalog.machines}
            placeholder="all machines"
            onChange={setField}
          />
        )}
        {fields.includes('version') && (
          <TextChoice
            label="Version"
            tooltip="Only this version (all when empty)"
            field="version"
            value={query.version}
            options={catalog.versions}
            placeholder="all versions"
            onChange={setField}
          />
        )}
        {fields.includes('experiment') && (
          <TextChoice
            label="Experiment"
            tooltip="The experiment's id, e.g. from the Experiments table (the newest when empty)"
            field="experiment"
            value={query.experiment}
            options={[]}
            placeholder="newest"
            onChange={setField}
          />
        )}
        {fields.includes('element') && (
          <TextChoice
            label="Element"
            tooltip="link:<source>-><target>, frequency:<machine> or capacity:<machine>"
            field="element"
            value={query.element}
            options={elementOptions}
            placeholder="all elements"
            onChange={setField}
          />
        )}
      </InlineFieldRow>

      {fields.includes('baseVersion') && (
        <InlineFieldRow>
          <TextChoice
            label="Base version"
            tooltip="The version the candidate is compared with"
            field="baseVersion"
            value={query.baseVersion}
            options={catalog.versions}
            placeholder="e.g. v1.4.2"
            onChange={setField}
          />
          <TextChoice
            label="Candidate"
            tooltip="The version under test"
            field="candidateVersion"
            value={query.candidateVersion}
            options={catalog.versions}
            placeholder="e.g. v1.5.0"
            onChange={setField}
          />
        </InlineFieldRow>
      )}

      {fields.includes('changes') && (
        <WhatIfEditor changes={changes} elementOptions={elementOptions} onChange={setChanges} />
      )}
    </Stack>
  );
}

interface WhatIfEditorProps {
  changes: WhatIfChange[];
  elementOptions: ResourceOption[];
  onChange: (changes: WhatIfChange[], run?: boolean) => void;
}

function WhatIfEditor({ changes, elementOptions, onChange }: WhatIfEditorProps) {
  const replace = (index: number, change: WhatIfChange) =>
    onChange(changes.map((c, i) => (i === index ? change : c)));

  return (
    <div data-testid="tierscope-whatif">
      {changes.length === 0 && <div>No change yet: add one to predict its effect on every transaction.</div>}
      {changes.map((change, index) => (
        // The key includes the length so removing a row remounts the uncontrolled delta inputs.
        <InlineFieldRow key={`${index}-${changes.length}`}>
          <InlineField label={`Change ${index + 1}`} labelWidth={LABEL_WIDTH} htmlFor={`tierscope-change-element-${index}`}>
            <Combobox<string>
              id={`tierscope-change-element-${index}`}
              data-testid={`tierscope-change-element-${index}`}
              width="auto"
              minWidth={INPUT_MIN_WIDTH}
              maxWidth={INPUT_MAX_WIDTH}
              placeholder="link:app->db"
              options={toComboboxOptions(elementOptions)}
              value={change.element || null}
              createCustomValue
              onChange={(option) => replace(index, { ...change, element: option.value })}
            />
          </InlineField>
          <InlineField label={`+ ${deltaUnit(change.element)}`} labelWidth="auto" htmlFor={`tierscope-change-delta-${index}`}>
            <Input
              id={`tierscope-change-delta-${index}`}
              data-testid={`tierscope-change-delta-${index}`}
              type="number"
              width={12}
              defaultValue={String(change.delta)}
              onBlur={(e: ChangeEvent<HTMLInputElement>) => {
                const delta = parseFloat(e.currentTarget.value);
                if (Number.isFinite(delta) && delta !== change.delta) {
                  replace(index, { ...change, delta });
                }
              }}
            />
          </InlineField>
          <InlineField>
            <IconButton
              name="trash-alt"
              tooltip={`Remove change ${index + 1}`}
              onClick={() => onChange(changes.filter((_, i) => i !== index))}
            />
          </InlineField>
        </InlineFieldRow>
      ))}
      <Button
        variant="secondary"
        size="sm"
        icon="plus"
        onClick={() => onChange([...changes, { element: '', delta: 0 }], false)}
      >
        Add change
      </Button>
    </div>
  );
}

/** Whether a query has what its type needs, so editing does not fire doomed requests. */
export function isRunnable(query: TierscopeQuery): boolean {
  switch (query.queryType) {
    case QueryType.Compare:
      return Boolean(query.service && query.baseVersion && query.candidateVersion);
    case QueryType.Predict:
      return (query.changes ?? []).some((c) => c.element !== '');
    default:
      return true;
  }
}
