package stitch

import (
	"strconv"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// attrKey names the span attributes stitching reads, current semantic
// conventions and legacy ones alike.
type attrKey uint8

const (
	aServicePeerName attrKey = iota
	aPeerService
	aDBSystemName
	aDBSystem
	aDBNamespace
	aDBName
	aRPCService
	aRPCMethod
	aRPCSystem
	aMessagingDestinationName
	aMessagingDestination
	aMessagingSystem
	aMessagingOperationType
	aMessagingOperation
	aServerAddress
	aNetPeerName
	aServerPort
	aNetPeerPort
	aURLFull
	aHTTPURL
	aNetworkPeerAddress
	aNetSockPeerAddr
	aNetworkPeerPort
	aNetSockPeerPort
	aURLPath
	aURLQuery
	aHTTPTarget
	aHTTPRequestMethod
	aHTTPMethod
	aNetHostName
	aNetHostPort
	aThreadID
	aThreadName
	aClientAddress
	aClientPort
	aNetPeerIP
	aMessageID
	aKafkaOffset
	aKafkaMessageOffset
	aPartitionID
	aKafkaDestinationPartition
	aKafkaPartition
	aTruthParent
	attrKeys
)

func keyOf(k string) (attrKey, bool) {
	switch k {
	case "service.peer.name":
		return aServicePeerName, true
	case "peer.service":
		return aPeerService, true
	case "db.system.name":
		return aDBSystemName, true
	case "db.system":
		return aDBSystem, true
	case "db.namespace":
		return aDBNamespace, true
	case "db.name":
		return aDBName, true
	case "rpc.service":
		return aRPCService, true
	case "rpc.method":
		return aRPCMethod, true
	case "rpc.system":
		return aRPCSystem, true
	case "messaging.destination.name":
		return aMessagingDestinationName, true
	case "messaging.destination":
		return aMessagingDestination, true
	case "messaging.system":
		return aMessagingSystem, true
	case "messaging.operation.type":
		return aMessagingOperationType, true
	case "messaging.operation":
		return aMessagingOperation, true
	case "server.address":
		return aServerAddress, true
	case "net.peer.name":
		return aNetPeerName, true
	case "server.port":
		return aServerPort, true
	case "net.peer.port":
		return aNetPeerPort, true
	case "url.full":
		return aURLFull, true
	case "http.url":
		return aHTTPURL, true
	case "network.peer.address":
		return aNetworkPeerAddress, true
	case "net.sock.peer.addr":
		return aNetSockPeerAddr, true
	case "network.peer.port":
		return aNetworkPeerPort, true
	case "net.sock.peer.port":
		return aNetSockPeerPort, true
	case "url.path":
		return aURLPath, true
	case "url.query":
		return aURLQuery, true
	case "http.target":
		return aHTTPTarget, true
	case "http.request.method":
		return aHTTPRequestMethod, true
	case "http.method":
		return aHTTPMethod, true
	case "net.host.name":
		return aNetHostName, true
	case "net.host.port":
		return aNetHostPort, true
	case "thread.id":
		return aThreadID, true
	case "thread.name":
		return aThreadName, true
	case "client.address":
		return aClientAddress, true
	case "client.port":
		return aClientPort, true
	case "net.peer.ip":
		return aNetPeerIP, true
	case "messaging.message.id":
		return aMessageID, true
	case "messaging.kafka.offset":
		return aKafkaOffset, true
	case "messaging.kafka.message.offset":
		return aKafkaMessageOffset, true
	case "messaging.destination.partition.id":
		return aPartitionID, true
	case "messaging.kafka.destination.partition":
		return aKafkaDestinationPartition, true
	case "messaging.kafka.partition":
		return aKafkaPartition, true
	case AttrTruthParent:
		return aTruthParent, true
	}
	return 0, false
}

// spanAttrs holds the attributes stitching reads, from one pass over a span's
// attributes: a pcommon.Map lookup is a scan, and a span is asked for some
// thirty names.
type spanAttrs struct {
	v [attrKeys]string
	// tooLong counts values longer than maxAttrLen, which are ignored so that
	// one huge attribute cannot bloat the address book.
	tooLong int
	// truth says the span carries AttrTruthParent (test data), so that the
	// truth is looked up only in rounds that have some.
	truth bool
}

func readAttrs(m pcommon.Map, a *spanAttrs, j *joiner) {
	*a = spanAttrs{}
	m.Range(func(k string, v pcommon.Value) bool {
		key, ok := keyOf(k)
		if !ok {
			return true
		}
		if key == aTruthParent {
			a.truth = true
			return true
		}
		var s string
		switch v.Type() {
		case pcommon.ValueTypeStr:
			s = v.Str()
		case pcommon.ValueTypeInt:
			s = j.itoa(v.Int())
		default:
			s = v.AsString()
		}
		if len(s) > maxAttrLen {
			a.tooLong++
			return true
		}
		a.v[key] = s
		return true
	})
}

// get is the first of the keys that is set.
func (a *spanAttrs) get(keys ...attrKey) string {
	for _, k := range keys {
		if s := a.v[k]; s != "" {
			return s
		}
	}
	return ""
}

// joiner builds the keys stitching derives from attributes ("host:port",
// "http /path", …) once per distinct input: spans repeat a few hundred values,
// and building each anew would allocate several strings per span. It is
// bounded: past maxJoined entries it starts over. A nil joiner builds every
// time.
type joiner struct {
	m    map[[3]string]string
	ints map[int64]string
	// masked holds the HTTP operations of masked paths by themselves; buf
	// is where httpOp builds its key.
	masked map[string]string
	buf    []byte
}

const maxJoined = 1 << 14

func (j *joiner) lookup(k [3]string) (string, bool) {
	if j == nil {
		return "", false
	}
	v, ok := j.m[k]
	return v, ok
}

func (j *joiner) store(k [3]string, v string) string {
	if j == nil {
		return v
	}
	if j.m == nil || len(j.m) >= maxJoined {
		j.m = make(map[[3]string]string)
	}
	j.m[k] = v
	return v
}

// concat is a + b + c.
func (j *joiner) concat(a, b, c string) string {
	k := [3]string{a, b, c}
	if v, ok := j.lookup(k); ok {
		return v
	}
	return j.store(k, a+b+c)
}

// itoa is the decimal form of an integer attribute (a port, a thread id).
func (j *joiner) itoa(i int64) string {
	if j == nil {
		return strconv.FormatInt(i, 10)
	}
	if s, ok := j.ints[i]; ok {
		return s
	}
	if j.ints == nil || len(j.ints) >= maxJoined {
		j.ints = make(map[int64]string)
	}
	s := strconv.FormatInt(i, 10)
	j.ints[i] = s
	return s
}
