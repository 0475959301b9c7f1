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

// Grafana serves its icons under public/build/img/icons/; @grafana/ui ships the same files.
const ICONS_URL = '/public/build/img/icons/';
const iconsDir = path.join(root, 'node_modules/@grafana/ui/dist/public/img/icons');
const missingIcons = [];

// Serves the plugin folder and Grafana's icons; anything else, or absent, is a 404.
const server = createServer((req, res) => {
  const urlPath = decodeURIComponent(new URL(req.url, 'http://harness').pathname);
  let file = path.join(root, urlPath === '/' ? 'tests/browser/harness/index.html' : urlPath);
  if (urlPath.startsWith(ICONS_URL)) {
    file = path.join(iconsDir, urlPath.slice(ICONS_URL.length));
    if (!file.startsWith(iconsDir + path.sep) || !existsSync(file)) {
      missingIcons.push(urlPath);
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { 'Content-Type': 'image/svg+xml' });
    res.end(readFileSync(file));
    return;
  }
  if (!file.startsWith(root + path.sep) || !existsSync(file)) {
    res.writeHead(404).end();
    return;
  }
  res.writeHead(200, { 'Content-Type': TYPES[path.extname(file)] ?? 'application/octet-stream' });
  res.end(readFileSync(file));
});
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
const baseURL = `http://127.0.0.1:${server.address().port}/`;

const screenshotDir = process.env.SCREENSHOT_DIR ? path.resolve(root, process.env.SCREENSHOT_DIR) : outputDir;

// layoutProblems returns, inside the element of testId, every pair of labels
// and controls whose boxes overlap (neither inside the other), every label or
// control another element covers at its centre (what a user would click),
// and every one that sticks out of the pane on the right.
async function layoutProblems(page, testId) {
  return page.evaluate((testId) => {
    const scope = document.querySelector(`[data-testid="${testId}"]`);
    const pane = document.querySelector('[data-testid="pane"]').getBoundingClientRect();
    const describe = (el) => {
      const text = (el.textContent || el.getAttribute('aria-label') || el.getAttribute('placeholder') || el.id || '').trim();
      return `${el.tagName.toLowerCase()}${el.id ? '#' + el.id : ''} "${text.slice(0, 30)}"`;
    };
    const visible = (el) => {
      const r = el.getBoundingClientRect();
      const cs = getComputedStyle(el);
      return r.width > 1 && r.height > 1 && cs.visibility !== 'hidden' && cs.display !== 'none' && Number(cs.opacity) > 0;
    };
    const elements = [...scope.querySelectorAll('label, input:not([type="radio"]), button, [role="combobox"]')].filter(visible);
    const problems = [];
    for (let i = 0; i < elements.length; i++) {
      const a = elements[i].getBoundingClientRect();
      for (let j = i + 1; j < elements.length; j++) {
        if (elements[i].contains(elements[j]) || elements[j].contains(elements[i])) {
          continue;
        }
        const b = elements[j].getBoundingClientRect();
        const w = Math.min(a.right, b.right) - Math.max(a.left, b.left);
        const h = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
        if (w > 1 && h > 1) {
          problems.push(`${describe(elements[i])} overlaps ${describe(elements[j])} by ${Math.round(w)}×${Math.round(h)} px`);
        }
      }
    }
    for (const el of elements) {
      const r = el.getBoundingClientRect();
      const top = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
      // A radio button's transparent input lies over its own label, as Grafana draws it.
      const ownInput = top && top.labels && [...top.labels].includes(el);
      if (top && !ownInput && !el.contains(top) && !top.contains(el)) {
        problems.push(`${describe(el)} is covered by ${describe(top)}`);
      }
      if (el.tagName === 'LABEL' && (el.scrollHeight > el.clientHeight + 1 || el.scrollWidth > el.clientWidth + 1)) {
        problems.push(`${describe(el)}: its text overflows the label`);
      }
      if (r.right > pane.right + 1) {
        problems.push(`${describe(el)} sticks out of the ${Math.round(pane.width)} px pane by ${Math.round(r.right - pane.right)} px`);
      }
    }
    return problems;
  }, testId);
}

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
    assert((await page.getByRole('radio').count()) === 11, 'want 11 query types');
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

  await check('with Grafana\'s global styles and icons no label or control overlaps another', async () => {
    const fontFamily = await page.evaluate(() => getComputedStyle(document.body).fontFamily);
    assert(/Inter/.test(fontFamily), `Grafana's global styles are not applied (body font ${fontFamily})`);
    await page.locator('[data-testid="tierscope-whatif"] svg').first().waitFor();
    const problems = [
      ...(await layoutProblems(page, 'query-editor-host')),
      ...(await layoutProblems(page, 'config-editor-host')),
    ];
    assert(problems.length === 0, problems.join('; '));
  });

  await check('the layout check reports a label that a control covers', async () => {
    // A control moved 40 px left over its label, as a too-wide dropdown would be.
    await page.evaluate(() => {
      const input = document.getElementById('tierscope-url');
      input.style.marginLeft = '-40px';
      input.style.position = 'relative';
    });
    const problems = await layoutProblems(page, 'config-editor-host');
    await page.evaluate(() => {
      const input = document.getElementById('tierscope-url');
      input.style.marginLeft = '';
      input.style.position = '';
    });
    assert(problems.some((p) => p.includes('tierscope-url') && p.includes('overlaps')), `not reported: ${problems.join('; ')}`);
    assert((await layoutProblems(page, 'config-editor-host')).length === 0, 'problems remain once the control is back');
  });

  mkdirSync(screenshotDir, { recursive: true });
  const screenshot = path.join(screenshotDir, 'editors.png');
  await page.screenshot({ path: screenshot, fullPage: true });
  console.log(`screenshot: ${path.relative(root, screenshot)}`);

  // A narrow query pane, as a panel editor beside its panel leaves it: every
  // query type's fields must fit without overlapping.
  const narrow = await browser.newPage({ viewport: { width: 520, height: 900 } });
  narrow.on('pageerror', (err) => pageErrors.push(err.message));
  narrow.setDefaultTimeout(8000);
  await narrow.route((url) => !url.href.startsWith(baseURL), (route) => {
    external.push(route.request().url());
    return route.abort();
  });
  await check('in a 420 px pane every query type fits and nothing overlaps', async () => {
    await narrow.goto(baseURL + '?pane=420', { waitUntil: 'commit', timeout: 60000 });
    await narrow.getByTestId('harness-ready').waitFor({ state: 'attached', timeout: 60000 });
    const problems = [];
    for (const name of ['Paths', 'Service graph', 'Latency', 'Work factors', 'Signatures', 'Compare', 'Gradients', 'Experiments', 'Profiles', 'Spectrum', 'What-if']) {
      // The previous option's description tooltip goes once the pointer leaves it.
      await narrow.mouse.move(1, 1);
      await narrow.getByRole('tooltip').waitFor({ state: 'detached' });
      await narrow
        .getByRole('radio', { name, exact: true })
        .click()
        .catch((err) => {
          throw new Error(`cannot choose ${name}: ${err.message.split('\n').slice(0, 12).join(' | ')}`);
        });
      if (name === 'What-if') {
        await narrow.getByRole('button', { name: 'Add change' }).click();
        await narrow.locator('[data-testid="tierscope-whatif"] svg').first().waitFor();
      }
      await narrow.mouse.move(1, 1);
      await narrow.getByRole('tooltip').waitFor({ state: 'detached' });
      for (const p of await layoutProblems(narrow, 'query-editor-host')) {
        problems.push(`${name}: ${p}`);
      }
    }
    problems.push(...(await layoutProblems(narrow, 'config-editor-host')));
    const narrowShot = path.join(screenshotDir, 'editors-narrow.png');
    await narrow.screenshot({ path: narrowShot, fullPage: true });
    console.log(`screenshot: ${path.relative(root, narrowShot)}`);
    assert(problems.length === 0, problems.join('; '));
  });

  await check('no uncaught error in the page, no missing icon, nothing fetched from outside', async () => {
    assert(pageErrors.length === 0, pageErrors.join('; '));
    assert(external.length === 0, `requests outside the harness: ${external.join(', ')}`);
    assert(missingIcons.length === 0, `icons not found: ${missingIcons.join(', ')}`);
  });
} finally {
  await browser.close();
  server.close();
}

const failed = results.filter((r) => !r.ok).length;
console.log(`${results.length - failed} passed, ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);
