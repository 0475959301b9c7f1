// Real-browser test of the BUILT editors: headless Debian Chromium, driven by
// playwright-core, loads dist/module.js in the harness page, chooses a query
// type, fills the what-if and the config, asserts on the DOM and saves a screenshot.
import { createServer } from 'node:http';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const outputDir = path.join(root, 'test-output');
const chromiumPath = process.env.CHROMIUM_PATH || '/usr/bin/chromium';

for (const needed of ['dist/module.js', 'tests/browser/harness/build/harness.js']) {
  if (!existsSync(path.join(root, needed))) {
    console.error(`${needed} is missing: run npm run build and npm run build:harness first`);
    process.exit(1);
  }
}

const TYPES = { '.html': 'text/html', '.js': 'text/javascript', '.css': 'text/css', '.json': 'application/json', '.svg': 'image/svg+xml' };

// Serves the plugin folder; anything outside it, or absent (Grafana's icon URLs), is a 404.
const server = createServer((req, res) => {
  const urlPath = decodeURIComponent(new URL(req.url, 'http://harness').pathname);
  const file = path.join(root, urlPath === '/' ? 'tests/browser/harness/index.html' : urlPath);
  if (!file.startsWith(root + path.sep) || !existsSync(file)) {
    res.writeHead(404).end();
    return;
  }
  res.writeHead(200, { 'Content-Type': TYPES[path.extname(file)] ?? 'application/octet-stream' });
  res.end(readFileSync(file));
});
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
const baseURL = `http://127.0.0.1:${server.address().port}/`;

const results = [];
async function check(name, fn) {
  const started = Date.now();
  try {
    await fn();
    results.push({ name, ok: true });
    console.log(`ok   ${name} (${Date.now() - started} ms)`);
  } catch (err) {
    results.push({ name, ok: false });
    console.log(`FAIL ${name}: ${err.message}`);
  }
}
function assert(condition, message) {
  if (!condition) {
    throw new Error(message);
  }
}

const browser = await chromium.launch({
  executablePath: chromiumPath,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
const pageErrors = [];
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  page.on('pageerror', (err) => pageErrors.push(err.message));
  page.setDefaultTimeout(8000);
  // Nothing may leave the machine: anything but the harness server is refused.
  const external = [];
  await page.route((url) => !url.href.startsWith(baseURL), (route) => {
    external.push(route.request().url());
    return route.abort();
  });
  const queryJSON = async () => JSON.parse(await page.getByTestId('query-json').textContent());
  const optionsJSON = async () => JSON.parse(await page.getByTestId('options-json').textContent());

  await check('the harness loads the built module.js and mounts both editors', async () => {
    await page.goto(baseURL, { waitUntil: 'commit', timeout: 60000 });
    // Parsing the 8 MB harness bundle is slow on a busy machine: allow for it here only.
    await Promise.race([
      page.getByTestId('harness-ready').waitFor({ state: 'attached', timeout: 60000 }),
      page
        .getByTestId('harness-error')
        .waitFor({ timeout: 60000 })
        .then(async () => {
          throw new Error(await page.getByTestId('harness-error').textContent());
        }),
    ]);
    assert((await page.getByRole('radio').count()) === 8, 'want 8 query types');
    assert((await queryJSON()).queryType === 'paths', 'the default query type is paths');
    await page.getByTestId('tierscope-top').waitFor();
  });

  await check('the editor loads the dropdowns through the datasource resources', async () => {
    await page.waitForFunction(() => window.resourceCalls.length >= 5);
    const calls = await page.evaluate(() => window.resourceCalls);
    for (const resource of ['services', 'transactions', 'versions', 'links', 'machines']) {
      assert(calls.includes(resource), `no call to the ${resource} resource: ${calls}`);
    }
  });

  await check('choosing a query type shows its fields', async () => {
    await page.getByRole('radio', { name: 'Service graph' }).click();
    assert((await queryJSON()).queryType === 'graph', 'query type is not graph');
    await page.getByTestId('tierscope-transaction').click();
    await page.getByRole('option', { name: 'GET /checkout' }).click();
    assert((await queryJSON()).transaction === 'GET /checkout', 'transaction not chosen');
    assert(Number(await page.getByTestId('query-runs').textContent()) >= 2, 'the query did not run');
  });

  await check('the what-if: add two changes, choose elements, fill deltas', async () => {
    await page.getByRole('radio', { name: 'What-if' }).click();
    await page.getByTestId('tierscope-query-description').filter({ hasText: 'Predicted response times' }).waitFor();
    const runsBefore = Number(await page.getByTestId('query-runs').textContent());

    await page.getByRole('button', { name: 'Add change' }).click();
    await page.getByTestId('tierscope-change-element-0').click();
    await page.getByTestId('tierscope-change-element-0').fill('app');
    await page.getByRole('option', { name: /app → db/ }).click();
    await page.getByTestId('tierscope-change-delta-0').fill('20');
    await page.getByTestId('tierscope-change-delta-0').press('Tab');

    await page.getByRole('button', { name: 'Add change' }).click();
    await page.getByTestId('tierscope-change-element-1').click();
    await page.getByRole('option', { name: 'frequency of host-a' }).click();
    await page.getByTestId('tierscope-change-delta-1').fill('-400');
    await page.getByTestId('tierscope-change-delta-1').press('Tab');

    const query = await queryJSON();
    assert(query.queryType === 'predict', `query type ${query.queryType}`);
    assert(
      JSON.stringify(query.changes) ===
        JSON.stringify([
          { element: 'link:app->db', delta: 20 },
          { element: 'frequency:host-a', delta: -400 },
        ]),
      `changes ${JSON.stringify(query.changes)}`
    );
    await page.getByText('+ ms', { exact: true }).waitFor();
    await page.getByText('+ MHz', { exact: true }).waitFor();
    assert(Number(await page.getByTestId('query-runs').textContent()) > runsBefore, 'the what-if did not run');
  });

  await check('the config editor keeps the URL in settings and the token in secureJsonData', async () => {
    await page.getByTestId('tierscope-url').fill('http://perfmodel:8790');
    await page.getByTestId('tierscope-token').fill('s3cret-token');
    await page.getByTestId('tierscope-timeout').fill('15');
    const options = await optionsJSON();
    assert(options.url === 'http://perfmodel:8790', `url ${options.url}`);
    assert(options.secureJsonData?.apiToken === 's3cret-token', 'token not in secureJsonData');
    assert(options.jsonData.timeoutSeconds === 15, 'timeout not in jsonData');
    assert(!JSON.stringify(options.jsonData).includes('s3cret'), 'the token leaked into jsonData');
    assert((await page.getByTestId('tierscope-token').getAttribute('type')) === 'password', 'the token is shown in clear');
  });

  await check('no uncaught error in the page', async () => {
    assert(pageErrors.length === 0, pageErrors.join('; '));
    assert(external.length === 0, `requests outside the harness: ${external.join(', ')}`);
  });

  mkdirSync(outputDir, { recursive: true });
  const screenshot = path.join(outputDir, 'editors.png');
  await page.screenshot({ path: screenshot, fullPage: true });
  console.log(`screenshot: ${path.relative(root, screenshot)}`);
} finally {
  await browser.close();
  server.close();
}

const failed = results.filter((r) => !r.ok).length;
console.log(`${results.length - failed} passed, ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);
