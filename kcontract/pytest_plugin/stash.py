"""What the plugin keeps in pytest's config stash, keyed here so the hooks and the nodes share one key."""

from __future__ import annotations

import pytest

RUNS = pytest.StashKey[dict]()  # resolved contract path -> ContractRun, set when --kcontract is given
RUNNER = pytest.StashKey[object]()  # the session's TaskRunner, started at the first item
