"""Orchestration learning: environments, policies, trainers, evaluation, export."""
