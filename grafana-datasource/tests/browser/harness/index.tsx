// The harness page: it plays Grafana's part for the built dist/module.js. It
// provides the modules Grafana shares with plugins (React, @grafana/*) to the
// AMD module, answers the datasource's resource calls from an in-page catalog
// (there is no Grafana server here), and mounts the plugin's editors.
import React, { useState } from 'react';
import * as ReactDOM from 'react-dom';
import { createRoot } from 'react-dom/client';
import * as emotionCss from '@emotion/css';
import * as grafanaData from '@grafana/data';
import * as grafanaRuntime from '@grafana/runtime';
import * as grafanaSchema from '@grafana/schema';
import * as grafanaUI from '@grafana/ui';
import * as rxjs from 'rxjs';

type AnyPlugin = grafanaData.DataSourcePlugin<any, any, any>;

const SHARED_MODULES: Record<string, unknown> = {
  react: React,
  'react-dom': ReactDOM,
  '@emotion/css': emotionCss,
  '@grafana/data': grafanaData,
  '@grafana/runtime': grafanaRuntime,
  '@grafana/schema': grafanaSchema,
  '@grafana/ui': grafanaUI,
  rxjs,
};

const CATALOG: Record<string, Array<{ label: string; value: string; description?: string }>> = {
  services: [
    { label: 'app', value: 'app' },
    { label: 'frontend', value: 'frontend' },
  ],
  transactions: [{ label: 'GET /checkout', value: 'GET /checkout' }],
  versions: [
    { label: 'v1', value: 'v1' },
    { label: 'v2', value: 'v2' },
  ],
  links: [
    { label: 'app → db', value: 'link:app->db', description: 'db:5432' },
    { label: 'frontend → app', value: 'link:frontend->app' },
  ],
  machines: [{ label: 'host-a', value: 'host-a' }],
};

declare global {
  interface Window {
    define?: (deps: string[], factory: (...modules: unknown[]) => unknown) => void;
    resourceCalls: string[];
  }
}
window.resourceCalls = [];

grafanaRuntime.setBackendSrv({
  fetch: (options: { url: string; params?: Record<string, string> }) => {
    const resource = options.url.split('/resources/')[1] ?? '';
    const query = new URLSearchParams(options.params ?? {}).toString();
    window.resourceCalls.push(query ? `${resource}?${query}` : resource);
    const body = CATALOG[resource];
    if (!body) {
      return rxjs.throwError(() => ({ status: 404, data: { error: `unknown resource ${resource}` } }));
    }
    return rxjs.of({ data: body, status: 200, ok: true, url: options.url });
  },
} as unknown as grafanaRuntime.BackendSrv);

/** Loads the built plugin as Grafana's SystemJS would: an AMD define with shared modules. */
function loadPlugin(src: string): Promise<AnyPlugin> {
  return new Promise((resolve, reject) => {
    window.define = (deps, factory) => {
      const missing = deps.filter((d) => !(d in SHARED_MODULES));
      if (missing.length > 0) {
        reject(new Error(`module.js needs modules Grafana would share but the harness lacks: ${missing.join(', ')}`));
        return;
      }
      const exports = factory(...deps.map((d) => SHARED_MODULES[d])) as { plugin?: AnyPlugin };
      exports.plugin ? resolve(exports.plugin) : reject(new Error('module.js exports no plugin'));
    };
    const script = document.createElement('script');
    script.src = src;
    script.onerror = () => reject(new Error(`cannot load ${src}`));
    document.head.appendChild(script);
  });
}

function QueryEditorHost({ plugin, datasource }: { plugin: AnyPlugin; datasource: any }) {
  const Editor = plugin.components.QueryEditor!;
  const [query, setQuery] = useState<any>({ refId: 'A', ...datasource.getDefaultQuery('panel-editor') });
  const [runs, setRuns] = useState(0);
  return (
    <section>
      <h2>QueryEditor</h2>
      <Editor query={query} datasource={datasource} onChange={setQuery} onRunQuery={() => setRuns((r) => r + 1)} />
      <pre data-testid="query-json">{JSON.stringify(query)}</pre>
      <div data-testid="query-runs">{runs}</div>
    </section>
  );
}

function ConfigEditorHost({ plugin }: { plugin: AnyPlugin }) {
  const Editor = plugin.components.ConfigEditor!;
  const [options, setOptions] = useState<any>({
    id: 1,
    uid: 'harness',
    name: 'Tierscope',
    type: 'tierscope-perfmodel-datasource',
    access: 'proxy',
    url: '',
    jsonData: {},
    secureJsonFields: {},
  });
  return (
    <section>
      <h2>ConfigEditor</h2>
      <Editor options={options} onOptionsChange={setOptions} />
      <pre data-testid="options-json">{JSON.stringify(options)}</pre>
    </section>
  );
}

async function main() {
  const root = createRoot(document.getElementById('root')!);
  try {
    const plugin = await loadPlugin('/dist/module.js');
    const DataSourceClass = plugin.DataSourceClass as any;
    const datasource = new DataSourceClass({
      id: 1,
      uid: 'harness',
      type: 'tierscope-perfmodel-datasource',
      name: 'Tierscope',
      access: 'proxy',
      jsonData: {},
      meta: { id: 'tierscope-perfmodel-datasource', info: {} },
      readOnly: false,
    });
    // The pane width, as a panel editor's query pane narrows it (?pane=420).
    const pane = Number(new URLSearchParams(window.location.search).get('pane')) || undefined;
    const mode = new URLSearchParams(window.location.search).get('theme') === 'dark' ? 'dark' : 'light';
    root.render(
      <grafanaUI.ThemeContext.Provider value={grafanaData.createTheme({ colors: { mode } })}>
        {/* Grafana's own global styles (fonts, form resets, body colours), as in its index page. */}
        <grafanaUI.GlobalStyles />
        <main style={{ padding: 16, width: pane === undefined ? undefined : pane + 32 }} data-testid="pane">
          <section data-testid="query-editor-host">
            <QueryEditorHost plugin={plugin} datasource={datasource} />
          </section>
          <section data-testid="config-editor-host">
            <ConfigEditorHost plugin={plugin} />
          </section>
          <div data-testid="harness-ready" />
        </main>
      </grafanaUI.ThemeContext.Provider>
    );
  } catch (err) {
    root.render(<pre data-testid="harness-error">{String(err instanceof Error ? err.stack : err)}</pre>);
  }
}

main();
