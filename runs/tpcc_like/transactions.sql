-- The five TPC-C-like transactions as functions (pgbench scripts have no loops). Row
-- locks are taken in one order everywhere (warehouse, district, then rows by key) and
-- stock rows by item id, so the mix does not deadlock.
CREATE FUNCTION tpcc_new_order(p_w int, p_d int, p_c int, p_lines int) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
  v_o_id int;
  v_item int;
  v_number int := 0;
  v_quantity int;
  v_price numeric;
BEGIN
  PERFORM w_tax FROM warehouse WHERE w_id = p_w;
  UPDATE district SET d_next_o_id = d_next_o_id + 1 WHERE d_w_id = p_w AND d_id = p_d
    RETURNING d_next_o_id - 1 INTO v_o_id;
  PERFORM c_discount, c_last, c_credit FROM customer
    WHERE c_w_id = p_w AND c_d_id = p_d AND c_id = p_c;
  INSERT INTO orders VALUES (p_w, p_d, v_o_id, p_c, now(), NULL, p_lines, 1);
  INSERT INTO new_order VALUES (p_w, p_d, v_o_id);
  FOR v_item IN
    SELECT 1 + floor(random() * 100000)::int AS i FROM generate_series(1, p_lines) ORDER BY i
  LOOP
    v_number := v_number + 1;
    v_quantity := 1 + floor(random() * 10)::int;
    SELECT i_price INTO v_price FROM item WHERE i_id = v_item;
    UPDATE stock SET
      s_quantity = CASE WHEN s_quantity >= v_quantity + 10 THEN s_quantity - v_quantity
                        ELSE s_quantity - v_quantity + 91 END,
      s_ytd = s_ytd + v_quantity, s_order_cnt = s_order_cnt + 1
      WHERE s_w_id = p_w AND s_i_id = v_item;
    INSERT INTO order_line
      VALUES (p_w, p_d, v_o_id, v_number, v_item, p_w, NULL, v_quantity,
              v_quantity * v_price, 'dist-info');
  END LOOP;
  RETURN v_o_id;
END
$$;

CREATE FUNCTION tpcc_payment(p_w int, p_d int, p_c int, p_cents int) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  v_amount numeric := p_cents / 100.0;
BEGIN
  UPDATE warehouse SET w_ytd = w_ytd + v_amount WHERE w_id = p_w;
  UPDATE district SET d_ytd = d_ytd + v_amount WHERE d_w_id = p_w AND d_id = p_d;
  UPDATE customer SET c_balance = c_balance - v_amount,
      c_ytd_payment = c_ytd_payment + v_amount, c_payment_cnt = c_payment_cnt + 1
    WHERE c_w_id = p_w AND c_d_id = p_d AND c_id = p_c;
  INSERT INTO history VALUES (p_c, p_d, p_w, p_d, p_w, now(), v_amount, 'payment');
END
$$;

CREATE FUNCTION tpcc_order_status(p_w int, p_d int, p_c int) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
  v_o_id int;
  v_lines bigint;
BEGIN
  PERFORM c_balance, c_first, c_last FROM customer
    WHERE c_w_id = p_w AND c_d_id = p_d AND c_id = p_c;
  SELECT max(o_id) INTO v_o_id FROM orders
    WHERE o_w_id = p_w AND o_d_id = p_d AND o_c_id = p_c;
  SELECT count(*) INTO v_lines FROM order_line
    WHERE ol_w_id = p_w AND ol_d_id = p_d AND ol_o_id = v_o_id;
  RETURN v_lines;
END
$$;

CREATE FUNCTION tpcc_delivery(p_w int, p_carrier int) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
  v_d int;
  v_o_id int;
  v_c_id int;
  v_total numeric;
  v_delivered int := 0;
BEGIN
  FOR v_d IN 1..10 LOOP
    DELETE FROM new_order WHERE (no_w_id, no_d_id, no_o_id) = (
      SELECT no_w_id, no_d_id, no_o_id FROM new_order
      WHERE no_w_id = p_w AND no_d_id = v_d ORDER BY no_o_id LIMIT 1 FOR UPDATE SKIP LOCKED
    ) RETURNING no_o_id INTO v_o_id;
    CONTINUE WHEN v_o_id IS NULL;
    UPDATE orders SET o_carrier_id = p_carrier
      WHERE o_w_id = p_w AND o_d_id = v_d AND o_id = v_o_id RETURNING o_c_id INTO v_c_id;
    UPDATE order_line SET ol_delivery_d = now()
      WHERE ol_w_id = p_w AND ol_d_id = v_d AND ol_o_id = v_o_id;
    SELECT sum(ol_amount) INTO v_total FROM order_line
      WHERE ol_w_id = p_w AND ol_d_id = v_d AND ol_o_id = v_o_id;
    UPDATE customer SET c_balance = c_balance + v_total, c_delivery_cnt = c_delivery_cnt + 1
      WHERE c_w_id = p_w AND c_d_id = v_d AND c_id = v_c_id;
    v_delivered := v_delivered + 1;
  END LOOP;
  RETURN v_delivered;
END
$$;

CREATE FUNCTION tpcc_stock_level(p_w int, p_d int, p_threshold int) RETURNS bigint
LANGUAGE sql STABLE AS $$
  SELECT count(DISTINCT s_i_id) FROM district, order_line, stock
  WHERE d_w_id = p_w AND d_id = p_d
    AND ol_w_id = p_w AND ol_d_id = p_d
    AND ol_o_id >= d_next_o_id - 20 AND ol_o_id < d_next_o_id
    AND s_w_id = p_w AND s_i_id = ol_i_id AND s_quantity < p_threshold
$$;
