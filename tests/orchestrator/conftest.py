import uuid

import psycopg
import pytest

from orchestrator.store import TrialStore

PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"


@pytest.fixture
def postgres_url():
    """A fresh, empty PostgreSQL database on the local server, dropped afterwards."""
    name = f"atoll_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    yield f"postgresql://postgres@127.0.0.1:5432/{name}"
    with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request, tmp_path):
    url = str(tmp_path / "atoll.db") if request.param == "sqlite" else request.getfixturevalue("postgres_url")
    trial_store = TrialStore(url)
    yield trial_store
    trial_store.dispose()
