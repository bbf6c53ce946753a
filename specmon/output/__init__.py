"""What leaves specmon: tables, reports, recordings, Prometheus metrics."""
