// Writes a Parquet file of an orders CSV with DuckDB (testdata/orders_regions.parquet is made
// so), with the column types a data team's export has when the CSV has order_id and region:
// ts as TIMESTAMP (INT64 microseconds), amount as DECIMAL(10,2) (INT64 with scale 2),
// order_id BIGINT, region VARCHAR. compare.sh also uses it for the benchmark file.
//
//   node to_parquet.mjs IN.csv OUT.parquet [ROW_GROUP_SIZE]
import { DuckDBInstance } from '@duckdb/node-api';

const [input, output, rowGroup = '4096'] = process.argv.slice(2);
if (!input || !output) {
  console.error('usage: node to_parquet.mjs IN.csv OUT.parquet [ROW_GROUP_SIZE]');
  process.exit(2);
}
const lit = (s) => "'" + s.replaceAll("'", "''") + "'";
const rg = Number.parseInt(rowGroup, 10);
const instance = await DuckDBInstance.create(':memory:');
const conn = await instance.connect();
const cols = (await conn.runAndReadAll(`DESCRIBE SELECT * FROM read_csv(${lit(input)})`)).getRows().map((r) => r[0]);
// The orders with ids and regions get a data team's types; the two-column benchmark files
// (ts, amount) are written as DuckDB reads them (ts BIGINT unix ms, amount DOUBLE), so the
// windows are those of the CSV.
const select = cols.includes('region')
  ? `order_id::BIGINT AS order_id, make_timestamp(ts::BIGINT * 1000) AS ts,
     amount::DECIMAL(10,2) AS amount, region::VARCHAR AS region`
  : '*';
await conn.run(`
COPY (SELECT ${select} FROM read_csv(${lit(input)}))
TO ${lit(output)} (FORMAT parquet, ROW_GROUP_SIZE ${rg})`);
