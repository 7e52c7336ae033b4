"""Live views: subscriptions to a table query's answer, pushed when it changes.

`arena.live.views` keeps the registry of views (one evaluation and one serialisation per view per
push interval, shared by all its subscribers), apart from the connections that deliver
(`arena.live.outbox`: one writer per connection, one latest-only slot per subscription). What a
view's answer is comes from the query layer (`arena.api.live`); the board actors only move seqs.
"""
