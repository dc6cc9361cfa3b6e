"""The Atlas evaluation harness: E0 corpus/plan/receipts/summaries and query-regression scoring."""
