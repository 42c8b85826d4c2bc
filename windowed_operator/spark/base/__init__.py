"""What every part of the Spark runner uses: the session and its settings, errors, progress and the
checkpoint's record, the hashes Spark assigns keys by, the handoff of rows, shipping the library."""
