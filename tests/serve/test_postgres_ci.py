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
