// Builds dist/module.js as Grafana loads it: an AMD module whose React and
// @grafana/* imports are provided by Grafana at run time (create-plugin's externals).
const path = require('path');
const CopyWebpackPlugin = require('copy-webpack-plugin');
const { version } = require('../package.json');

const root = path.resolve(__dirname, '..');

module.exports = (env = {}) => ({
  mode: env.development ? 'development' : 'production',
  context: root,
  devtool: env.development ? 'eval-source-map' : 'source-map',
  entry: { module: './src/module.ts' },
  output: {
    path: path.join(root, 'dist'),
    filename: '[name].js',
    library: { type: 'amd' },
    publicPath: 'public/plugins/tierscope-perfmodel-datasource/',
    uniqueName: 'tierscope-perfmodel-datasource',
    clean: { keep: /^gpx_/ },
  },
  externals: [
    'react',
    'react-dom',
    '@grafana/data',
    '@grafana/runtime',
    '@grafana/ui',
    '@grafana/schema',
    '@emotion/css',
    '@emotion/react',
    'rxjs',
    'lodash',
  ],
  resolve: { extensions: ['.ts', '.tsx', '.js', '.jsx'] },
  module: {
    rules: [
      {
        test: /\.[tj]sx?$/,
        exclude: /node_modules/,
        use: {
          loader: 'swc-loader',
          options: {
            jsc: {
              baseUrl: root,
              target: 'es2020',
              parser: { syntax: 'typescript', tsx: true, decorators: false },
              transform: { react: { runtime: 'classic' } },
            },
          },
        },
      },
    ],
  },
  plugins: [
    new CopyWebpackPlugin({
      patterns: [
        {
          from: 'src/plugin.json',
          to: '.',
          transform: (content) =>
            content
              .toString()
              .replace('%VERSION%', version)
              .replace('%TODAY%', new Date().toISOString().slice(0, 10)),
        },
        { from: 'src/img', to: 'img' },
        { from: 'src/dashboards', to: 'dashboards' },
        { from: 'README.md', to: '.' },
      ],
    }),
  ],
  performance: { hints: false },
});
