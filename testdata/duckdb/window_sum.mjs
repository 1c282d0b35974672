// DuckDB anchor for `slide batch --size K --agg sum`: the best sum of K consecutive rows of a
// CSV (or, for a FILE ending in .parquet, a Parquet file: read_parquet), computed with a window
// function, end to end in one process.
//
//   node window_sum.mjs FILE [K] [COLUMN]      prints {"best":…,"n":…,"windows":…}
//
// Only full windows count: partial frames at the start of the file (fewer than K rows) are
// filtered out with a count over the same frame, so the answer is the one slide prints.
import { DuckDBInstance } from '@duckdb/node-api';

const [file, kArg = '1000', column = 'amount'] = process.argv.slice(2);
if (!file) {
  console.error('usage: node window_sum.mjs FILE [K] [COLUMN]');
  process.exit(2);
}
const k = Number.parseInt(kArg, 10);
if (!(k >= 1)) {
  console.error(`K must be a positive integer, got ${kArg}`);
  process.exit(2);
}
const ident = '"' + column.replaceAll('"', '""') + '"';
const lit = "'" + file.replaceAll("'", "''") + "'";
const frame = `ROWS BETWEEN ${k - 1} PRECEDING AND CURRENT ROW`;
const sql = `
WITH w AS (
  SELECT sum(${ident}) OVER (${frame}) AS s,
         count(*)      OVER (${frame}) AS c
  FROM ${file.endsWith('.parquet') ? `read_parquet(${lit})` : `read_csv(${lit})`}
)
SELECT max(s) FILTER (WHERE c = ${k}) AS best,
       count(*)                      AS n,
       count(*) FILTER (WHERE c = ${k}) AS windows
FROM w`;

const instance = await DuckDBInstance.create(':memory:');
const conn = await instance.connect();
const reader = await conn.runAndReadAll(sql);
const [best, n, windows] = reader.getRows()[0];
console.log(JSON.stringify({ best: best === null ? null : Number(best), n: Number(n), windows: Number(windows) }));
