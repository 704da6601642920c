"""The PostgreSQL server of .ci/run answers, and the server tests cannot quietly skip it under CI."""

from __future__ import annotations

import pytest

from tests.serve.postgres import ENV, WHY, postgres_url


def test_the_test_server_is_postgresql_and_takes_a_schema():
    sqlalchemy = pytest.importorskip("sqlalchemy")
    engine = sqlalchemy.create_engine(postgres_url())
    try:
        with engine.begin() as connection:
            version = connection.execute(sqlalchemy.text("select version()")).scalar_one()
            connection.execute(sqlalchemy.text("create temporary table probe (n integer)"))
            connection.execute(sqlalchemy.text("insert into probe values (41), (1)"))
            total = connection.execute(sqlalchemy.text("select sum(n) from probe")).scalar_one()
    finally:
        engine.dispose()
    assert version.startswith("PostgreSQL ")
    assert total == 42


def test_without_the_url_ci_fails_and_a_developer_skips(monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match=ENV):
        postgres_url()
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception) as info:
        postgres_url()
    assert str(info.value.msg) == WHY
    monkeypatch.setenv(ENV, "postgresql+psycopg://u:p@127.0.0.1:1/db")
    assert postgres_url() == "postgresql+psycopg://u:p@127.0.0.1:1/db"


def test_each_pytest_process_keeps_to_a_schema_of_its_own() -> None:
    """Two xdist workers run server tests of different files at once on the one server, and each test empties its
    database first: a shared schema let one worker's reset drop the other's queued submissions mid-test (a CI
    failure: the in-test grading worker found nothing to grade)."""
    from urllib.parse import parse_qs, urlsplit

    from tests.serve.postgres import in_schema, worker_schema

    assert worker_schema("gw0") == "t_gw0"
    assert worker_schema("gw1") != worker_schema("gw0")
    assert worker_schema("Odd-Name") == "t_odd_name"
    url = in_schema("postgresql+psycopg://u:p@127.0.0.1:1/db", "t_gw1")
    assert parse_qs(urlsplit(url).query) == {"options": ["-csearch_path=t_gw1"]}
    assert parse_qs(urlsplit(in_schema(url.split("?")[0] + "?sslmode=disable", "t_x")).query) == {
        "sslmode": ["disable"],
        "options": ["-csearch_path=t_x"],
    }


def test_two_schemas_on_the_server_do_not_see_each_others_tables() -> None:
    sqlalchemy = pytest.importorskip("sqlalchemy")
    from tests.serve.postgres import in_schema

    url = postgres_url()
    admin = sqlalchemy.create_engine(url)
    with admin.begin() as connection:
        for schema in ("t_iso_a", "t_iso_b"):
            connection.execute(sqlalchemy.text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
            connection.execute(sqlalchemy.text(f'CREATE SCHEMA "{schema}"'))
    admin.dispose()
    try:
        first = sqlalchemy.create_engine(in_schema(url, "t_iso_a"))
        with first.begin() as connection:
            connection.execute(sqlalchemy.text("CREATE TABLE queued (id integer)"))
            connection.execute(sqlalchemy.text("INSERT INTO queued VALUES (7)"))
        first.dispose()
        second = sqlalchemy.create_engine(in_schema(url, "t_iso_b"))
        with second.connect() as connection:
            seen = connection.execute(sqlalchemy.text("SELECT to_regclass('queued') IS NULL")).scalar()
        second.dispose()
        assert seen is True  # the other schema's table is not on this connection's search path
    finally:
        admin = sqlalchemy.create_engine(url)
        with admin.begin() as connection:
            for schema in ("t_iso_a", "t_iso_b"):
                connection.execute(sqlalchemy.text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
        admin.dispose()
