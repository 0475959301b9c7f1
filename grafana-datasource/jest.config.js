// Unit tests of the editors and the datasource class, in jsdom.
const fs = require('fs');
const path = require('path');

// Jest runs CommonJS, but some of @grafana/ui's dependencies ship only ES modules:
// find the packages that declare "type": "module" so swc compiles them too.
function esmOnlyPackages(dir = path.join(__dirname, 'node_modules')) {
  const names = [];
  for (const entry of fs.existsSync(dir) ? fs.readdirSync(dir) : []) {
    const scoped = entry.startsWith('@');
    for (const name of scoped ? fs.readdirSync(path.join(dir, entry)).map((n) => `${entry}/${n}`) : [entry]) {
      try {
        const pkg = JSON.parse(fs.readFileSync(path.join(dir, name, 'package.json'), 'utf8'));
        if (pkg.type === 'module') {
          names.push(name.replace(/[.+]/g, '\\$&'));
        }
      } catch {
        // not a package
      }
    }
  }
  return names;
}

module.exports = {
  testEnvironment: 'jsdom',
  roots: ['<rootDir>/src'],
  testMatch: ['**/*.test.ts', '**/*.test.tsx'],
  setupFilesAfterEnv: ['<rootDir>/jest.setup.js'],
  transform: {
    '^.+\\.(mjs|[tj]sx?)$': [
      '@swc/jest',
      { jsc: { parser: { syntax: 'typescript', tsx: true }, transform: { react: { runtime: 'classic' } }, target: 'es2020' } },
    ],
  },
  moduleFileExtensions: ['ts', 'tsx', 'js', 'jsx', 'mjs', 'cjs', 'json'],
  moduleNameMapper: {
    '\\.(css|scss|sass)$': 'identity-obj-proxy',
    '^react-inlinesvg$': '<rootDir>/src/__mocks__/react-inlinesvg.tsx',
  },
  transformIgnorePatterns: [`node_modules/(?!(${esmOnlyPackages().join('|')})/)(?!.*\\.mjs$)`],
};
