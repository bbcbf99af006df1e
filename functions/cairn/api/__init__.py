"""HTTP edge: one Powertools resolver serves Lambda and `cairn serve` alike."""
