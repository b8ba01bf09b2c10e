"""How a design is measured: the fidelity it trains at, the data, training and the analyses (`measures`, the one
module that builds and trains), a trial's objective (`trial`), a table that answers instead (`replay`) and a
torchrun group as one worker (`distributed`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from archdsl.exports import lazy_exports

if TYPE_CHECKING:  # each export's definition, for type checkers and editors; `_EXPORTS` imports it on first use
    from archdsl.search.fidelity.measures import DataContext as DataContext
    from archdsl.search.fidelity.measures import Fidelity as Fidelity
    from archdsl.search.fidelity.measures import load_data as load_data
    from archdsl.search.fidelity.measures import train_candidate as train_candidate
    from archdsl.search.fidelity.replay import Table as Table
    from archdsl.search.fidelity.replay import load_replay as load_replay
    from archdsl.search.fidelity.trial import TrialObjective as TrialObjective

_EXPORTS = {
    "DataContext": "archdsl.search.fidelity.measures",
    "Fidelity": "archdsl.search.fidelity.measures",
    "load_data": "archdsl.search.fidelity.measures",
    "train_candidate": "archdsl.search.fidelity.measures",
    "Table": "archdsl.search.fidelity.replay",
    "load_replay": "archdsl.search.fidelity.replay",
    "TrialObjective": "archdsl.search.fidelity.trial",
}
__getattr__, __dir__, __all__ = lazy_exports(__name__, _EXPORTS)
