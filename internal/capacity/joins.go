package capacity

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed scripts/join_use.lua
	joinUseLua    string
	joinUseScript = redis.NewScript(joinUseLua)
)

// ClaimJoinUse records nodeID as a use of the one-use launch token of
// launch, which allows max nodes until until (P:join-uses:<launch>, gone
// after until). It reports false when max other nodes used it already. A
// Redis that lost the key forgets the uses: the token's expiry still
// bounds them.
func (v *View) ClaimJoinUse(ctx context.Context, launch, nodeID string, max int, until time.Time) (bool, error) {
	ok, err := joinUseScript.Run(ctx, v.rdb, []string{v.k.joinUses + launch}, nodeID, max, until.UnixMilli()).Int()
	if err != nil {
		return false, fmt.Errorf("join use of %s: %w", launch, err)
	}
	return ok == 1, nil
}
