"""Exploring a fleet's start-up: a race at every access point, and the real writer at each step.

Owns ``server_fleet.explore``'s engine (``explorer``: ``Explorer``), an ``explore=True``
case's request and the words for a member's failure at a point
(``request``), ``server_fleet.explore_writer`` (``writer``) and the real writer's steps and
process (``writer_steps``). What an exploration found is the one model of
``races.exploration``.
"""
