// DuckDB anchor for `slide batch --span Nm --agg p95`: the largest 95th percentile of amount
// over a time window of N minutes ending at every row (ts in unix ms), end to end.
//
//   node window_p95.mjs FILE [MINUTES] [COLUMN]      prints {"best":…,"n":…}
//
// RANGE … PRECEDING is closed at its start ([ts − N min, ts]) where slide's window is open
// ((ts − span, ts]); with millisecond timestamps the two differ only when a row is exactly N
// minutes older, and compare.sh checks the answers agree within 2% (slide's quantiles come
// from a 1% DDSketch, DuckDB's quantile_cont interpolates).
import { DuckDBInstance } from '@duckdb/node-api';

const [file, minArg = '5', column = 'amount'] = process.argv.slice(2);
if (!file) {
  console.error('usage: node window_p95.mjs FILE [MINUTES] [COLUMN]');
  process.exit(2);
}
const minutes = Number.parseInt(minArg, 10);
const ident = '"' + column.replaceAll('"', '""') + '"';
const lit = "'" + file.replaceAll("'", "''") + "'";
const from = file.endsWith('.parquet') ? `read_parquet(${lit})` : `read_csv(${lit})`;
const sql = `
SELECT max(q) AS best, count(*) AS n FROM (
  SELECT quantile_cont(${ident}, 0.95) OVER (
           ORDER BY make_timestamp(ts::BIGINT * 1000)
           RANGE BETWEEN INTERVAL ${minutes} MINUTES PRECEDING AND CURRENT ROW) AS q
  FROM ${from})`;
const instance = await DuckDBInstance.create(':memory:');
const conn = await instance.connect();
const reader = await conn.runAndReadAll(sql);
const [best, n] = reader.getRows()[0];
console.log(JSON.stringify({ best: Number(best), n: Number(n) }));
