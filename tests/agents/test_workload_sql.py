"""Splitting workload SQL as psql and pgbench do, and refusing server-side COPY early (pure)."""

import pytest

from agents.contract.errors import JobError
from agents.contract.spec.document import validate_spec
from agents.contract.workload_text.sql_text import SqlTextError, server_side_copy, split_statements
from agents.contract.workload_text.workload_sql import check_workload_sql


def texts(sql: str, meta_commands: bool = False) -> list[str]:
    return [statement.text for statement in split_statements(sql, meta_commands)]


def spec_with(setup_sql: str = "", script: str | None = None) -> dict:
    document = {
        "version": 1,
        "dataset": {"setup_sql": setup_sql},
        "sweep": {"clients": [1], "duration_s": 1},
    }
    if script is not None:
        document["workload"] = {"scripts": [{"name": "mine", "text": script, "weight": 1}]}
    return validate_spec(document)


def test_semicolons_inside_strings_comments_and_parentheses_do_not_split() -> None:
    sql = (
        "-- leading comment; still a comment\n"
        "SELECT 'a;b', E'it\\'s;', $tag$ ; $tag$, \"odd;name\" /* c; /* nested; */ ; */;\n"
        "CREATE RULE r AS ON INSERT TO t DO ALSO (INSERT INTO u VALUES (1); NOTIFY t);\n"
        "SELECT 2"
    )
    assert texts(sql) == [
        "SELECT 'a;b', E'it\\'s;', $tag$ ; $tag$, \"odd;name\" /* c; /* nested; */ ; */",
        "CREATE RULE r AS ON INSERT TO t DO ALSO (INSERT INTO u VALUES (1); NOTIFY t)",
        "SELECT 2",
    ]


def test_a_sql_standard_function_body_stays_one_statement() -> None:
    sql = (
        "CREATE OR REPLACE PROCEDURE p(i int) LANGUAGE sql BEGIN ATOMIC\n"
        "  INSERT INTO t VALUES (CASE WHEN i > 0 THEN i ELSE 0 END);\n"
        "  DELETE FROM t WHERE id < 0;\n"
        "END;\n"
        "CALL p(1);"
    )
    statements = split_statements(sql)
    assert [s.text.split()[0] for s in statements] == ["CREATE", "CALL"]
    assert statements[1].line == 5


def test_plpgsql_bodies_are_strings() -> None:
    sql = (
        "CREATE FUNCTION bump(i int) RETURNS void LANGUAGE plpgsql AS $$\n"
        "BEGIN UPDATE kv SET v = v + 1 WHERE id = i; END $$;\n"
        "SELECT bump(1);"
    )
    assert len(texts(sql)) == 2


def test_pgbench_commands_are_numbered_as_pgbench_numbers_them() -> None:
    script = (
        "\\set aid random(1, 100000 * :scale)\n"
        "BEGIN;\n"
        "SELECT abalance\n  FROM pgbench_accounts WHERE aid = :aid \\gset\n"
        "\\sleep 1 ms\n"
        "END;\n"
    )
    assert texts(script, meta_commands=True) == [
        "\\set aid random(1, 100000 * :scale)",
        "BEGIN",
        "SELECT abalance\n  FROM pgbench_accounts WHERE aid = :aid",
        "\\sleep 1 ms",
        "END",
    ]


def test_an_open_quote_names_its_line() -> None:
    with pytest.raises(SqlTextError, match="line 2"):
        split_statements("SELECT 1;\nSELECT 'oops;\n")


@pytest.mark.parametrize(
    ("sql", "reason"),
    [
        ("COPY t FROM PROGRAM 'id > /tmp/x'", "runs a program on the benchmark host"),
        ("copy (select 1) to program $$touch x$$", "runs a program"),
        ("COPY t (a, b) FROM '/etc/passwd' WITH (FORMAT csv)", "reads a file on the benchmark"),
        ("COPY (SELECT * FROM t) TO '/tmp/out'", "writes a file on the benchmark host"),
        ("COPY BINARY t TO E'/tmp/o'", "writes a file"),
    ],
)
def test_server_side_copy_is_recognised(sql: str, reason: str) -> None:
    assert reason in server_side_copy(split_statements(sql)[0])


@pytest.mark.parametrize(
    "sql",
    [
        "COPY t FROM STDIN",
        "COPY (SELECT * FROM t WHERE x = 'PROGRAM') TO STDOUT",
        "SELECT 'COPY t FROM PROGRAM ''id'''",
        "CREATE TABLE program (id int)",
        'COPY "from" TO STDOUT',
    ],
)
def test_copy_through_the_client_and_other_statements_are_not_server_side(sql: str) -> None:
    assert server_side_copy(split_statements(sql)[0]) is None


def test_setup_sql_with_copy_program_is_refused_naming_the_statement() -> None:
    spec = spec_with("CREATE TABLE t (id int);\n\nCOPY t FROM PROGRAM 'id > /tmp/x';")

    with pytest.raises(JobError) as refused:
        check_workload_sql(spec, allow_superuser_sql=False)

    assert refused.value.code == "refused_sql"
    assert refused.value.category == "user"
    assert refused.value.field == "dataset.setup_sql"
    assert "statement 2 (line 3) `COPY t FROM PROGRAM 'id > /tmp/x'`" in refused.value.message
    assert "superuser" in refused.value.message


def test_a_script_writing_a_server_file_is_refused_naming_the_script() -> None:
    spec = spec_with(script="\\set x 1\nCOPY (SELECT :x) TO '/tmp/x';\n")

    with pytest.raises(JobError) as refused:
        check_workload_sql(spec, allow_superuser_sql=False)

    assert refused.value.field == "workload.scripts[0].text"
    assert "writes a file on the benchmark host (COPY ... TO '/tmp/x')" in refused.value.message


def test_the_agent_config_allowing_superuser_sql_lets_it_through() -> None:
    spec = spec_with("COPY t FROM PROGRAM 'id'", script="COPY (SELECT 1) TO '/tmp/x';")
    check_workload_sql(spec, allow_superuser_sql=True)


HIDDEN_COPIES = {
    "literal": "DO $$ BEGIN EXECUTE 'COPY t FROM PROGRAM ''id'''; END $$",
    "single-quoted body": "DO 'BEGIN EXECUTE ''COPY t FROM PROGRAM ''''id''''''; END'",
    "static in the body": "DO $$ BEGIN IF true THEN COPY t FROM PROGRAM 'id'; END IF; END $$",
    "nested": "DO $a$ BEGIN EXECUTE $b$ DO $c$ BEGIN EXECUTE 'COPY t TO ''/x'''; END $c$ $b$;"
    " END $a$",
    "concatenated": "DO $$ BEGIN EXECUTE 'COPY t FROM PRO' || 'GRAM ''id'''; END $$",
    "format": "DO $$ BEGIN EXECUTE format('COPY t FROM %s %L', 'PROGRAM', 'id'); END $$",
    "format positions": "DO $$ BEGIN EXECUTE format('%2$s t FROM %1$s ''id''', 'program', "
    "'COPY'); END $$",
    "chr": "DO $$ BEGIN EXECUTE 'COPY t FROM ' || chr(80) || 'ROGRAM ''id'''; END $$",
    "chr in concat": "DO $$ BEGIN EXECUTE concat(chr(67), 'OPY t FROM ', upper('program'), "
    "' ''id'''); END $$",
    "escaped": "DO $$ BEGIN EXECUTE E'\\x43OPY t FROM PROGRAM \\'id\\''; END $$",
    "unicode escapes": "DO $$ BEGIN EXECUTE U&'\\0043OPY t FROM PROGRAM ''id'''; END $$",
    "function body": "CREATE FUNCTION f() RETURNS void LANGUAGE plpgsql AS $$ BEGIN "
    "EXECUTE 'COPY t FROM PROGRAM ''id'''; END $$",
    "file write": "DO $$ BEGIN EXECUTE format('COPY t TO %L', '/tmp/x'); END $$",
}


@pytest.mark.parametrize("sql", HIDDEN_COPIES.values(), ids=HIDDEN_COPIES.keys())
def test_a_copy_hidden_in_a_do_block_function_or_execute_is_refused(sql: str) -> None:
    spec = spec_with(f"CREATE TABLE t (x text);\n{sql};")

    with pytest.raises(JobError) as refused:
        check_workload_sql(spec, allow_superuser_sql=False)

    assert refused.value.code == "refused_sql"
    assert refused.value.field == "dataset.setup_sql"
    message = refused.value.message
    assert message.startswith("statement 2 (line 2) `"), message
    assert "on the benchmark host (COPY ..." in message
    assert "runs as a role without superuser rights" in message


UNREADABLE = {
    "a variable": "DO $$ DECLARE c text := 'COPY t FROM PROGRAM ''id'''; BEGIN EXECUTE c; END $$",
    "a copy's target": "DO $$ DECLARE w text := 'PROGRAM'; BEGIN EXECUTE 'COPY t FROM ' || w"
    " || ' ''id'''; END $$",
    "a formatted copy": "DO $$ BEGIN EXECUTE format('COPY t FROM %s', current_setting('x'));"
    " END $$",
    "a command word": "DO $$ BEGIN EXECUTE format('%s t FROM PROGRAM ''id''', lower(v)); END $$",
    "a glued command word": "DO $$ BEGIN EXECUTE format('CO%s t', v); END $$",
    "chr of a value": "DO $$ BEGIN EXECUTE chr(67) || chr(n) || 'PY t FROM PROGRAM ''id'''; END $$",
    "a built DO block": "DO $$ BEGIN EXECUTE 'DO $b$ BEGIN ' || v || '; END $b$'; END $$",
}


@pytest.mark.parametrize("sql", UNREADABLE.values(), ids=UNREADABLE.keys())
def test_an_execute_the_check_cannot_read_is_refused_saying_so(sql: str) -> None:
    with pytest.raises(JobError) as refused:
        check_workload_sql(spec_with(sql), allow_superuser_sql=False)

    assert refused.value.code == "refused_sql"
    assert refused.value.field == "dataset.setup_sql"
    message = refused.value.message
    assert "known only at run time" in message
    assert "cannot follow values known only when it runs" in message
    assert "actual guard" in message, "the message says the check is not the guard"


READABLE = {
    "partitions in a loop": "DO $$ BEGIN FOR i IN 0..3 LOOP EXECUTE format('CREATE TABLE p%s"
    " PARTITION OF t FOR VALUES WITH (MODULUS 4, REMAINDER %s)', i, i); END LOOP; END $$",
    "concatenated names": "DO $$ BEGIN EXECUTE 'ANALYZE ' || quote_ident(r.name); END $$",
    "a static body": "DO $$ BEGIN INSERT INTO t SELECT g FROM generate_series(1, 10) g; END $$",
    "a copy through the client": "DO $$ BEGIN EXECUTE 'COPY t TO STDOUT'; END $$",
    "a string about COPY": "DO $$ BEGIN RAISE NOTICE 'COPY t FROM PROGRAM'; END $$",
    "a grant": "DO $$ BEGIN GRANT EXECUTE ON FUNCTION f() TO PUBLIC; END $$",
    "a trigger": "CREATE TRIGGER t AFTER INSERT ON t EXECUTE FUNCTION f()",
    "another language": "DO LANGUAGE plperl $$ my $copy = 'COPY t FROM PROGRAM'; $$",
    "a function using into": "CREATE FUNCTION n() RETURNS int LANGUAGE plpgsql AS $$ DECLARE"
    " c int; BEGIN EXECUTE 'SELECT count(*) FROM ' || quote_ident(tg) INTO c; RETURN c;"
    " END $$",
}


@pytest.mark.parametrize("sql", READABLE.values(), ids=READABLE.keys())
def test_dynamic_sql_that_plainly_runs_no_server_side_copy_passes(sql: str) -> None:
    check_workload_sql(spec_with(sql), allow_superuser_sql=False)


def test_an_agent_allowing_superuser_sql_runs_dynamic_sql_unread() -> None:
    check_workload_sql(spec_with(UNREADABLE["a variable"]), allow_superuser_sql=True)


def test_a_copy_hidden_in_a_script_names_the_script() -> None:
    spec = spec_with(script="DO $$ BEGIN EXECUTE format('COPY t TO PROGRAM %L', 'x'); END $$;\n")

    with pytest.raises(JobError) as refused:
        check_workload_sql(spec, allow_superuser_sql=False)

    assert refused.value.field == "workload.scripts[0].text"
    assert "runs a program on the benchmark host (COPY ... TO PROGRAM)" in refused.value.message


def test_unterminated_setup_sql_is_an_invalid_spec_naming_the_field() -> None:
    with pytest.raises(JobError) as invalid:
        check_workload_sql(spec_with("SELECT $$never closed"), allow_superuser_sql=True)

    assert (invalid.value.code, invalid.value.field) == ("invalid_spec", "dataset.setup_sql")


@pytest.mark.parametrize(
    "document",
    [
        {"version": 1, "allow_superuser_sql": True},
        {"version": 1, "workload": {"allow_superuser_sql": True}},
        {"version": 1, "dataset": {"superuser": True}},
    ],
)
def test_no_spec_field_can_turn_superuser_sql_on(document: dict) -> None:
    with pytest.raises(JobError) as invalid:
        validate_spec(document)

    assert invalid.value.code == "invalid_spec"
    assert "unknown field" in invalid.value.message


def test_a_stray_closing_parenthesis_does_not_swallow_the_statements_after_it() -> None:
    assert texts("SELECT 1);\nSELECT U&'semi;colon';\nSELECT 3") == [
        "SELECT 1)",
        "SELECT U&'semi;colon'",
        "SELECT 3",
    ]
