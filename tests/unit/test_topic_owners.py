"""The topic owners a checkpoint keeps across batches and runs (avro_registry_sink/routing/owners.py)."""

from __future__ import annotations

import json

import pytest

from avro_registry_sink.errors import ConfigError, RoutingError
from avro_registry_sink.routing.owners import TopicOwners
from avro_registry_sink.routing.rules import TopicRouter
from avro_registry_sink.side_state import SideState
from avro_registry_sink.storage_fs import StoreFS, parse_storage_uri


def _state(path) -> SideState:
    return SideState(StoreFS(parse_storage_uri(str(path), option="checkpoint"), option="checkpoint"))


OWNERS = "state/owners/0000000003.json"


def test_routes_saved_by_one_run_are_claimed_by_the_next(tmp_path):
    first = TopicRouter(topic_rule="{schema}_{table}")
    owners = TopicOwners(_state(tmp_path))
    owners.claim_all(first, 3)  # nothing recorded yet
    assert not (tmp_path / "state").exists()
    assert owners.save([first.route("shop", "订单"), first.route("shop", "goods")], 3) is True
    assert json.loads((tmp_path / OWNERS).read_text(encoding="utf-8")) == {"version": 1, "topics": {
        "shop___": {"table": ["shop", "订单"], "subjects": ["shop___-key", "shop___-value"]},
        "shop_goods": {"table": ["shop", "goods"], "subjects": ["shop_goods-key", "shop_goods-value"]},
    }}
    written = (tmp_path / OWNERS).stat().st_mtime_ns
    assert owners.save([first.route("shop", "订单")], 4) is False  # nothing new: not rewritten
    assert (tmp_path / OWNERS).stat().st_mtime_ns == written
    assert not (tmp_path / "state/owners/0000000004.json").exists()

    second = TopicRouter(topic_rule="{schema}_{table}")
    TopicOwners(_state(tmp_path)).claim_all(second, 5)
    assert second.claimed_earlier(second.route("shop", "订单"))
    with pytest.raises(RoutingError) as info:
        second.route("shop", "商品")
    assert info.value.context["other_table"] == "shop.订单" and info.value.context["topic"] == "shop___"
    assert "earlier batch or run of this checkpoint" in str(info.value)


def test_an_unreadable_file_is_refused_with_the_way_out(tmp_path):
    (tmp_path / OWNERS).parent.mkdir(parents=True)
    (tmp_path / OWNERS).write_text('{"topics": {"t": {"table": "x"}}}', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"^The checkpoint's topic owners \(state/owners/\) are unreadable \(ValueError: .*delete "
                                          r"it to forget the tables of earlier runs"):
        TopicOwners(_state(tmp_path)).claim_all(TopicRouter(topic_rule="{schema}_{table}"), 4)
