-- The X filtered stream's position (poller `stream` mode), shared by the replicas so the one that
-- takes the stream over after a failover knows where the gap started: `alive_at` is the last time
-- the holder saw the stream alive (a tweet or a keep-alive), `last_tweet_id` the newest tweet it
-- recorded. One row per stream (name 'x').
CREATE TABLE "x_stream_state" (
    "name" TEXT NOT NULL,
    "last_tweet_id" TEXT,
    "alive_at" TIMESTAMPTZ(3),
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "x_stream_state_pkey" PRIMARY KEY ("name")
);
