"""The result line's claim (console/result_claim.py): it holds until a row it has seen in the claimed state shows the
other state; a row that has not caught up yet, or a replica gone, says nothing."""

from __future__ import annotations

from lerobot_fleet.console.result_claim import ResultClaim
from lerobot_fleet.data.model import ServerRow


def rows(**state: ServerRow) -> dict[str, ServerRow]:
    return dict(state)


def test_a_claim_holds_until_a_row_seen_in_its_state_changes_back():
    claim = ResultClaim("cordon", ("a", "b"))
    assert claim.changed_since(rows(a=ServerRow("a"), b=ServerRow("b"))) == ""  # the rows lag the reply
    assert claim.changed_since(rows(a=ServerRow("a", cordoned=True), b=ServerRow("b", cordoned=True))) == ""
    assert claim.changed_since(rows(a=ServerRow("a"), b=ServerRow("b", cordoned=True))) == "a is uncordoned now"
    assert claim.changed_since(rows(a=ServerRow("a"), b=ServerRow("b"))) == "a, b are uncordoned now"


def test_a_drained_replica_that_went_away_keeps_the_line_and_one_restarted_undoes_it():
    claim = ResultClaim("drain", ("a",))
    assert claim.changed_since(rows(a=ServerRow("a", draining=True))) == ""
    assert claim.changed_since(rows(a=ServerRow("a", health="gone"))) == ""  # drained and gone: as claimed
    assert claim.changed_since(rows()) == ""
    assert claim.changed_since(rows(a=ServerRow("a"))) == "a is no longer draining now"


def test_a_reset_claims_nothing_a_row_can_undo():
    assert ResultClaim("reset", ("arm-1",)).changed_since(rows()) == ""
