package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/segmentio/kafka-go"
)

// memberInfo is the user data each member sends when it joins the group.
type memberInfo struct {
	Addr string `json:"addr"` // advertised HTTP host:port
}

// MemberData is the consumer-group user data advertising addr (ingest.Config.MemberData).
func MemberData(addr string) []byte {
	b, _ := json.Marshal(memberInfo{Addr: addr})
	return b
}

// View is who owns what, as the consumer group last said when it was stable: partition →
// the advertised HTTP address of its member. It is immutable once built.
type View struct {
	Partitions int              // partitions of the topic
	Owner      map[int32]string // partition → advertised address; absent: unassigned
	Members    int              // members of the group
	Addrs      map[string]bool  // the members' advertised addresses (nil when not described)
	At         time.Time        // when it was read
}

// peers groups the partitions of v owned by members other than self, by address.
func (v *View) peers(self string, skip func(int32) bool) map[string][]int32 {
	out := map[string][]int32{}
	for p, addr := range v.Owner {
		if addr != self && !skip(p) {
			out[addr] = append(out[addr], p)
		}
	}
	for _, ps := range out {
		slices.Sort(ps)
	}
	return out
}

// describe reads the group's members, their advertised addresses and assignments, and the
// topic's partition count. A group that is rebalancing answers errNotStable: its
// assignments are in flux, and the previous view stays in use meanwhile.
func describe(ctx context.Context, client *kafka.Client, group, topic string) (*View, error) {
	md, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
	if err != nil {
		return nil, fmt.Errorf("reading topic metadata: %w", err)
	}
	v := &View{Owner: map[int32]string{}, At: time.Now()}
	for _, t := range md.Topics {
		if t.Name == topic {
			if t.Error != nil {
				return nil, fmt.Errorf("topic %q: %w", topic, t.Error)
			}
			v.Partitions = len(t.Partitions)
		}
	}
	// Past this point a failure still returns v with the partition count: an instance
	// assigned every partition needs nothing else (Local), even where ACLs forbid
	// describing the group.
	resp, err := client.DescribeGroups(ctx, &kafka.DescribeGroupsRequest{GroupIDs: []string{group}})
	if err != nil {
		return v, fmt.Errorf("describing group %q: %w", group, err)
	}
	for _, g := range resp.Groups {
		if g.GroupID != group {
			continue
		}
		if g.Error != nil {
			return v, fmt.Errorf("describing group %q: %w", group, g.Error)
		}
		if g.GroupState != "Stable" {
			return nil, fmt.Errorf("%w: group %q is %s", errNotStable, group, g.GroupState)
		}
		for _, m := range g.Members {
			var info memberInfo
			if err := json.Unmarshal(m.MemberMetadata.UserData, &info); err != nil || info.Addr == "" {
				info.Addr = "" // a member that advertises nothing (an older slide) owns unreachable partitions
			}
			v.Members++
			if v.Addrs == nil {
				v.Addrs = map[string]bool{}
			}
			v.Addrs[info.Addr] = true
			for _, t := range m.MemberAssignments.Topics {
				if t.Topic != topic {
					continue
				}
				for _, p := range t.Partitions {
					v.Owner[int32(p)] = info.Addr
				}
			}
		}
	}
	return v, nil
}

var errNotStable = errors.New("consumer group not stable")
