"""The Hessian spectrum over training (Park & Kim, Fig. 5 and C.5): one spectrum per kept checkpoint."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from archdsl.analysis.hessian import Spectrum


class TrajectoryPoint(BaseModel):
    """The spectrum of one checkpoint of a run, and the epoch it was kept after."""

    model_config = ConfigDict(frozen=True)

    epoch: int
    checkpoint: str  # the file measured
    spectrum: Spectrum

    @property
    def top_eigenvalues(self) -> list[float]:
        """The largest-magnitude eigenvalue of each batch."""
        k = self.spectrum.k
        return [self.spectrum.eigenvalues[i] for i in range(0, len(self.spectrum.eigenvalues), k)]


class HessianTrajectory(BaseModel):
    """Spectra of the checkpoints of one run, by epoch, all measured with the same settings and batches."""

    model_config = ConfigDict(frozen=True)

    points: tuple[TrajectoryPoint, ...]
