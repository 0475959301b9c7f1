// Browser APIs that jsdom lacks and @grafana/ui uses.
require('@testing-library/jest-dom');
const { TextEncoder, TextDecoder } = require('util');

Object.assign(global, { TextEncoder, TextDecoder });

Object.defineProperty(window, 'matchMedia', {
  writable: true,
  value: (query) => ({
    matches: false,
    media: query,
    onchange: null,
    addListener: () => {},
    removeListener: () => {},
    addEventListener: () => {},
    removeEventListener: () => {},
    dispatchEvent: () => false,
  }),
});

class NoopObserver {
  observe() {}
  unobserve() {}
  disconnect() {}
  takeRecords() {
    return [];
  }
}
global.ResizeObserver = global.ResizeObserver || NoopObserver;
global.IntersectionObserver = global.IntersectionObserver || NoopObserver;
// Combobox sizes its menu with canvas text metrics: an approximate width will do.
HTMLCanvasElement.prototype.getContext = () => ({
  font: '',
  measureText: (text) => ({ width: 7 * String(text).length }),
});
