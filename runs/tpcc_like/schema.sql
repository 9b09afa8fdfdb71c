-- TPC-C-like schema and loader (BenchLab). Not an audited TPC-C: no think or keying
-- times, uniform instead of NURand keys, customers by id only, no 1 % new-order rollback.
CREATE TABLE warehouse (
  w_id int PRIMARY KEY, w_name text NOT NULL, w_tax numeric(4, 4) NOT NULL,
  w_ytd numeric(12, 2) NOT NULL
);
CREATE TABLE district (
  d_w_id int NOT NULL, d_id int NOT NULL, d_name text NOT NULL, d_tax numeric(4, 4) NOT NULL,
  d_ytd numeric(12, 2) NOT NULL, d_next_o_id int NOT NULL, PRIMARY KEY (d_w_id, d_id)
);
CREATE TABLE customer (
  c_w_id int NOT NULL, c_d_id int NOT NULL, c_id int NOT NULL, c_first text NOT NULL,
  c_last text NOT NULL, c_credit char(2) NOT NULL, c_discount numeric(4, 4) NOT NULL,
  c_balance numeric(12, 2) NOT NULL, c_ytd_payment numeric(12, 2) NOT NULL,
  c_payment_cnt int NOT NULL, c_delivery_cnt int NOT NULL, c_data text NOT NULL,
  PRIMARY KEY (c_w_id, c_d_id, c_id)
);
CREATE TABLE history (
  h_c_id int NOT NULL, h_c_d_id int NOT NULL, h_c_w_id int NOT NULL, h_d_id int NOT NULL,
  h_w_id int NOT NULL, h_date timestamptz NOT NULL, h_amount numeric(6, 2) NOT NULL,
  h_data text NOT NULL
);
CREATE TABLE item (
  i_id int PRIMARY KEY, i_name text NOT NULL, i_price numeric(5, 2) NOT NULL, i_data text NOT NULL
);
CREATE TABLE stock (
  s_w_id int NOT NULL, s_i_id int NOT NULL, s_quantity int NOT NULL, s_ytd int NOT NULL,
  s_order_cnt int NOT NULL, s_remote_cnt int NOT NULL, s_data text NOT NULL,
  PRIMARY KEY (s_w_id, s_i_id)
);
CREATE TABLE orders (
  o_w_id int NOT NULL, o_d_id int NOT NULL, o_id int NOT NULL, o_c_id int NOT NULL,
  o_entry_d timestamptz NOT NULL, o_carrier_id int, o_ol_cnt int NOT NULL,
  o_all_local int NOT NULL, PRIMARY KEY (o_w_id, o_d_id, o_id)
);
CREATE TABLE new_order (
  no_w_id int NOT NULL, no_d_id int NOT NULL, no_o_id int NOT NULL,
  PRIMARY KEY (no_w_id, no_d_id, no_o_id)
);
CREATE TABLE order_line (
  ol_w_id int NOT NULL, ol_d_id int NOT NULL, ol_o_id int NOT NULL, ol_number int NOT NULL,
  ol_i_id int NOT NULL, ol_supply_w_id int NOT NULL, ol_delivery_d timestamptz,
  ol_quantity int NOT NULL, ol_amount numeric(6, 2) NOT NULL, ol_dist_info text NOT NULL,
  PRIMARY KEY (ol_w_id, ol_d_id, ol_o_id, ol_number)
);

-- The initial population of TPC-C section 4.3, per warehouse: 10 districts, 3,000
-- customers and 3,000 orders per district (the last 900 undelivered), 5-15 lines per
-- order, 100,000 stock rows; 100,000 items in all.
CREATE FUNCTION tpcc_load(warehouses int) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO item
    SELECT i, 'item-' || i, 1 + (i * 7919 % 9900) / 100.0, repeat('x', 26 + i % 25)
    FROM generate_series(1, 100000) AS i;
  INSERT INTO warehouse
    SELECT w, 'warehouse-' || w, (w % 2000) / 10000.0, 300000 FROM generate_series(1, warehouses) AS w;
  INSERT INTO district
    SELECT w, d, 'district-' || d, (d * 97 % 2000) / 10000.0, 30000, 3001
    FROM generate_series(1, warehouses) AS w, generate_series(1, 10) AS d;
  INSERT INTO customer
    SELECT w, d, c, 'first-' || c, tpcc_last_name((c - 1) % 1000),
      CASE WHEN c % 10 = 0 THEN 'BC' ELSE 'GC' END, (c % 5000) / 10000.0, -10, 10, 1, 0,
      repeat('c', 300 + c % 200)
    FROM generate_series(1, warehouses) AS w, generate_series(1, 10) AS d,
      generate_series(1, 3000) AS c;
  INSERT INTO history
    SELECT c, d, w, d, w, now(), 10, 'initial'
    FROM generate_series(1, warehouses) AS w, generate_series(1, 10) AS d,
      generate_series(1, 3000) AS c;
  INSERT INTO stock
    SELECT w, i, 10 + i % 91, 0, 0, 0, repeat('s', 26 + i % 25)
    FROM generate_series(1, warehouses) AS w, generate_series(1, 100000) AS i;
  INSERT INTO orders
    SELECT w, d, o, 1 + (o * 1597) % 3000, now(), CASE WHEN o <= 2100 THEN 1 + o % 10 END,
      5 + o % 11, 1
    FROM generate_series(1, warehouses) AS w, generate_series(1, 10) AS d,
      generate_series(1, 3000) AS o;
  INSERT INTO new_order
    SELECT w, d, o FROM generate_series(1, warehouses) AS w, generate_series(1, 10) AS d,
      generate_series(2101, 3000) AS o;
  INSERT INTO order_line
    SELECT o_w_id, o_d_id, o_id, n, 1 + (o_id * 31 + n * 7919) % 100000, o_w_id,
      CASE WHEN o_id <= 2100 THEN o_entry_d END, 5,
      CASE WHEN o_id <= 2100 THEN 0 ELSE (1 + (o_id * n) % 999999) / 100.0 END, 'dist-info'
    FROM orders, generate_series(1, o_ol_cnt) AS n;
  CREATE INDEX customer_last_name ON customer (c_w_id, c_d_id, c_last, c_first);
  CREATE INDEX orders_customer ON orders (o_w_id, o_d_id, o_c_id, o_id);
END
$$;

-- TPC-C's last names: three syllables chosen by the digits of a number below 1000.
CREATE FUNCTION tpcc_last_name(n int) RETURNS text LANGUAGE sql IMMUTABLE AS $$
  SELECT s[n / 100 % 10 + 1] || s[n / 10 % 10 + 1] || s[n % 10 + 1]
  FROM (SELECT ARRAY['BAR', 'OUGHT', 'ABLE', 'PRI', 'PRES', 'ESE', 'ANTI', 'CALLY', 'ATION',
    'EING'] AS s) AS syllables
$$;
