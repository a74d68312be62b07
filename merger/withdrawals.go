package merger

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/gatefold/gatefold/fold"
	"github.com/gatefold/gatefold/rules"
)

// withdrawalMemo remembers, per Gateway, the listeners withdrawn by the last
// fold.
type withdrawalMemo struct {
	mu        sync.Mutex
	byGateway map[types.NamespacedName]map[fold.WithdrawalKey]fold.Withdrawal
}

// recall returns the withdrawals of the Gateway's sources: those the last
// fold made, and those their statuses record that it does not know of.
func (m *withdrawalMemo) recall(key types.NamespacedName, sources []rules.Source, now time.Time) map[fold.WithdrawalKey]fold.Withdrawal {
	m.mu.Lock()
	out := map[fold.WithdrawalKey]fold.Withdrawal{}
	for k, w := range m.byGateway[key] {
		out[k] = w
	}
	m.mu.Unlock()
	for i := range sources {
		for k, w := range fold.WithdrawalsInStatus(&sources[i], now) {
			if _, known := out[k]; !known {
				out[k] = w
			}
		}
	}
	return out
}

// remember replaces the Gateway's withdrawals with a fold's.
func (m *withdrawalMemo) remember(key types.NamespacedName, withdrawn map[fold.WithdrawalKey]fold.Withdrawal) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.byGateway == nil {
		m.byGateway = map[types.NamespacedName]map[fold.WithdrawalKey]fold.Withdrawal{}
	}
	if len(withdrawn) == 0 {
		delete(m.byGateway, key)
		return
	}
	m.byGateway[key] = withdrawn
}

func (m *withdrawalMemo) forget(key types.NamespacedName) { m.remember(key, nil) }
