"""A study's record: the name and meaning of every attribute a search writes (`record`), study names (`naming`),
and where a study lives (`storage`, `proxy`; the journal file, its lock and its repair are private)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from archdsl.exports import lazy_exports

if TYPE_CHECKING:  # each export's definition, for type checkers and editors; `_EXPORTS` imports it on first use
    from archdsl.search.studies._journal_check import JournalRepair as JournalRepair
    from archdsl.search.studies._journal_check import repair_journal as repair_journal
    from archdsl.search.studies.naming import check_study_name as check_study_name
    from archdsl.search.studies.naming import default_study_name as default_study_name
    from archdsl.search.studies.proxy import start_proxy as start_proxy
    from archdsl.search.studies.record import trials as trials
    from archdsl.search.studies.storage import StorageOptions as StorageOptions
    from archdsl.search.studies.storage import journal_path as journal_path
    from archdsl.search.studies.storage import open_storage as open_storage

_EXPORTS = {
    "JournalRepair": "archdsl.search.studies._journal_check",
    "repair_journal": "archdsl.search.studies._journal_check",
    "check_study_name": "archdsl.search.studies.naming",
    "default_study_name": "archdsl.search.studies.naming",
    "start_proxy": "archdsl.search.studies.proxy",
    "trials": "archdsl.search.studies.record",
    "StorageOptions": "archdsl.search.studies.storage",
    "journal_path": "archdsl.search.studies.storage",
    "open_storage": "archdsl.search.studies.storage",
}
__getattr__, __dir__, __all__ = lazy_exports(__name__, _EXPORTS)
