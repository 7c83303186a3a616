"""Runs SQL over ptdec Parquet datasets with a real engine, for the tests.

    python sql.py ENGINE ROOT < queries.json > results.json

ENGINE is `duckdb`, `datafusion`, `polars` or `spark` (with `PT_SPARK`
naming a Spark installation). ROOT is a dataset folder as
`ptdec TRACE -o ROOT --format parquet` writes it (one folder per table,
each trace in its own `trace=NAME` folder below). The tables `calls`,
`marks`, `threads` and `trace` are registered over their folders the way
docs/sql.md tells a user to read them, with `trace` a column from the
folder names: DuckDB with `read_parquet('ROOT/calls/*/*.parquet',
hive_partitioning = true)`, DataFusion with `register_parquet('calls',
'ROOT/calls/', table_partition_cols=[('trace', pyarrow.string())])`,
Polars with `scan_parquet('ROOT/calls/*/*.parquet', hive_partitioning=True)`.

stdin: a JSON list of SQL queries. stdout: a JSON list with, per query,
{"columns": [...], "rows": [[...], ...]} or {"error": "..."}. Floats are
rounded to 6 significant digits, so that the engines' results compare.
"""

import json
import math
import os
import sys

TABLES = ["calls", "marks", "threads", "trace"]


def plain(v):
    if isinstance(v, float):
        if math.isnan(v) or math.isinf(v):
            return str(v)
        return float(f"{v:.6g}")
    if isinstance(v, (bytes, bytearray)):
        return v.hex()
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    if isinstance(v, dict):
        return {k: plain(x) for k, x in v.items()}
    return v


def tables(root):
    return [t for t in TABLES if os.path.isdir(os.path.join(root, t))]


def run_duckdb(root, queries):
    import duckdb

    con = duckdb.connect()
    for t in tables(root):
        path = os.path.join(root, t, "*", "*.parquet").replace("'", "''")
        # `trace` is a column from the folders' `trace=NAME`.
        con.execute(
            f"CREATE VIEW {t} AS SELECT * FROM read_parquet('{path}', "
            "hive_partitioning = true, union_by_name = true)"
        )
    out = []
    for q in queries:
        try:
            cur = con.execute(q)
            cols = [d[0] for d in cur.description]
            out.append({"columns": cols, "rows": [plain(list(r)) for r in cur.fetchall()]})
        except Exception as e:  # the test prints the engine's message
            out.append({"error": f"{type(e).__name__}: {e}"})
    return out


def run_datafusion(root, queries):
    import datafusion

    import pyarrow

    ctx = datafusion.SessionContext()
    for t in tables(root):
        # `trace` is a column from the folders' `trace=NAME`.
        ctx.register_parquet(
            t, os.path.join(root, t) + "/", table_partition_cols=[("trace", pyarrow.string())]
        )
    out = []
    for q in queries:
        try:
            table = ctx.sql(q).to_arrow_table()
            cols = table.column_names
            rows = [plain([r[c] for c in cols]) for r in table.to_pylist()]
            out.append({"columns": cols, "rows": rows})
        except Exception as e:
            out.append({"error": f"{type(e).__name__}: {e}"})
    return out


def run_polars(root, queries):
    import polars

    ctx = polars.SQLContext()
    for t in tables(root):
        path = os.path.join(root, t, "*", "*.parquet")
        ctx.register(t, polars.scan_parquet(path, hive_partitioning=True))
    out = []
    for q in queries:
        try:
            df = ctx.execute(q).collect()
            out.append({"columns": df.columns, "rows": [plain(list(r)) for r in df.rows()]})
        except Exception as e:
            out.append({"error": f"{type(e).__name__}: {e}"})
    return out


def run_spark(root, queries):
    # PT_SPARK: a Spark installation (SPARK_HOME, with python/ and its
    # py4j), or the `pyspark` folder of a pip-installed PySpark.
    home = os.environ["PT_SPARK"]
    py = os.path.join(home, "python")
    if os.path.isdir(os.path.join(py, "pyspark", "sql")):
        sys.path[:0] = [py] + [
            os.path.join(py, "lib", z) for z in os.listdir(os.path.join(py, "lib")) if z.startswith("py4j")
        ]
    else:
        sys.path.insert(0, os.path.dirname(os.path.abspath(home)))
    os.environ.setdefault("SPARK_HOME", home)
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.session.timeZone", "UTC")
        # `trace=123` stays the string "123".
        .config("spark.sql.sources.partitionColumnTypeInference.enabled", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    for t in tables(root):
        # `trace` is a partition column from the folders' `trace=NAME`.
        spark.read.parquet(os.path.join(root, t)).createOrReplaceTempView(t)
    out = []
    for q in queries:
        try:
            df = spark.sql(q)
            cols = df.columns
            rows = [plain([r[c] for c in range(len(cols))]) for r in df.collect()]
            out.append({"columns": cols, "rows": rows})
        except Exception as e:
            out.append({"error": f"{type(e).__name__}: {e}"})
    spark.stop()
    return out


def main():
    engine, root = sys.argv[1], sys.argv[2]
    queries = json.load(sys.stdin)
    run = {
        "duckdb": run_duckdb,
        "datafusion": run_datafusion,
        "polars": run_polars,
        "spark": run_spark,
    }[engine]
    json.dump(run(root, queries), sys.stdout)


if __name__ == "__main__":
    main()
