package capacity

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/gangwayhq/gangway"
)

// AppendLog appends a line to the job's log stream, trimming the stream to
// about Options.LogMaxLen lines (XADD MAXLEN ~). l.ID is ignored: Redis
// assigns IDs.
func (v *View) AppendLog(ctx context.Context, jobID gangway.JobID, l gangway.LogLine) error {
	err := v.rdb.XAdd(ctx, &redis.XAddArgs{
		Stream: v.k.logPrefix + jobID,
		MaxLen: v.logMaxLen,
		Approx: true,
		Values: []any{
			"t", l.Time.UnixMilli(),
			"rank", l.Rank,
			"attempt", l.Attempt,
			"text", l.Text,
		},
	}).Err()
	if err != nil {
		return fmt.Errorf("append log %s: %w", jobID, err)
	}
	return nil
}

// Logs returns the job's lines after the entry ID after ("" = from the
// start). With block > 0 and nothing new, it waits up to block for new lines
// (XREAD BLOCK) and returns an empty slice on timeout.
func (v *View) Logs(ctx context.Context, jobID gangway.JobID, after string, block time.Duration) ([]gangway.LogLine, error) {
	key := v.k.logPrefix + jobID
	var msgs []redis.XMessage
	if block > 0 {
		if after == "" {
			after = "0-0"
		}
		if block < time.Millisecond {
			block = time.Millisecond // BLOCK 0 would wait forever
		}
		streams, err := v.rdb.XRead(ctx, &redis.XReadArgs{Streams: []string{key, after}, Block: block}).Result()
		if errors.Is(err, redis.Nil) {
			return []gangway.LogLine{}, nil
		}
		if err != nil {
			return nil, fmt.Errorf("logs %s: %w", jobID, err)
		}
		for _, s := range streams {
			msgs = append(msgs, s.Messages...)
		}
	} else {
		start := "-"
		if after != "" {
			start = "(" + after
		}
		var err error
		msgs, err = v.rdb.XRange(ctx, key, start, "+").Result()
		if err != nil {
			return nil, fmt.Errorf("logs %s: %w", jobID, err)
		}
	}
	lines := make([]gangway.LogLine, 0, len(msgs))
	for _, m := range msgs {
		lines = append(lines, decodeLogLine(m))
	}
	return lines, nil
}

// decodeLogLine reads a stream entry; a malformed field reads as zero
// rather than losing the line.
func decodeLogLine(m redis.XMessage) gangway.LogLine {
	l := gangway.LogLine{ID: m.ID}
	str := func(k string) string {
		s, _ := m.Values[k].(string)
		return s
	}
	if ms, err := strconv.ParseInt(str("t"), 10, 64); err == nil {
		l.Time = time.UnixMilli(ms)
	}
	l.Rank, _ = strconv.Atoi(str("rank"))
	l.Attempt, _ = strconv.Atoi(str("attempt"))
	l.Text = str("text")
	return l
}
