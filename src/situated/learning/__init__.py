"""Learning from outcomes: utility rates and lifecycle transitions."""
