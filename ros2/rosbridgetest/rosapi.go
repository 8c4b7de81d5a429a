package rosbridgetest

import (
	"encoding/json"
	"sort"
	"strings"
)

// rosapi answers the rosapi services the fake serves, and reports whether
// name is one of them for the server's Version:
//   - /rosapi/topics, /rosapi/services, /rosapi/topic_type,
//     /rosapi/service_type: every version; the types are spelled as declared
//     (AddTopic, AddService). An action server's hidden
//     <action>/_action/send_goal service has type "" as in rosbridge
//     2.0.0/2.1.0, whose rosapi omits hidden services
//     (Options.HiddenServiceTypes: "<pkg>/action/<Type>_SendGoal");
//   - /rosapi/action_type ({action} -> {type}): only with
//     Options.RosapiActionType, as newer rosapi builds serve it;
//   - /rosapi/get_ros_version ({version: 2, distro}): ROS 2 versions;
//   - /rosapi/action_servers ({action_servers: [names]}): ROS 2 action
//     servers, or on Rosbridge011 actionlib servers (found by their topics).
func (s *Server) rosapi(name string, args json.RawMessage) (any, bool) {
	var a struct {
		Topic   string `json:"topic"`
		Service string `json:"service"`
	}
	_ = json.Unmarshal(args, &a)
	v := s.opts.Version
	s.mu.Lock()
	defer s.mu.Unlock()
	switch name {
	case "/rosapi/topic_type":
		t := ""
		if tp, ok := s.topics[a.Topic]; ok {
			t = tp.typ
		}
		return map[string]any{"type": t}, true
	case "/rosapi/service_type":
		t := ""
		if sv, ok := s.services[a.Service]; ok {
			t = sv.typ
		} else if act, ok := strings.CutSuffix(a.Service, "/_action/send_goal"); ok && v != Rosbridge011 && s.opts.HiddenServiceTypes {
			if ac, ok := s.actions[act]; ok {
				t = ac.typ + "_SendGoal"
			}
		}
		return map[string]any{"type": t}, true
	case "/rosapi/action_type":
		if v == Rosbridge011 || !s.opts.RosapiActionType {
			return nil, false
		}
		var b struct {
			Action string `json:"action"`
		}
		_ = json.Unmarshal(args, &b)
		t := ""
		if ac, ok := s.actions[b.Action]; ok {
			t = ac.typ
		}
		return map[string]any{"type": t}, true
	case "/rosapi/topics":
		names := make([]string, 0, len(s.topics))
		for n := range s.topics {
			names = append(names, n)
		}
		sort.Strings(names)
		types := make([]string, len(names))
		for i, n := range names {
			types[i] = s.topics[n].typ
		}
		return map[string]any{"topics": names, "types": types}, true
	case "/rosapi/services": // names, as rosapi lists them (mhp init ros2)
		names := make([]string, 0, len(s.services))
		for n := range s.services {
			names = append(names, n)
		}
		sort.Strings(names)
		return map[string]any{"services": names}, true
	case "/rosapi/get_ros_version":
		if v == Rosbridge011 {
			return nil, false
		}
		return map[string]any{"version": 2, "distro": "jazzy"}, true
	case "/rosapi/action_servers":
		var names []string
		if v == Rosbridge011 {
			// ROS 1 rosapi lists actionlib servers, found by their topics.
			for n, t := range s.topics {
				if ns, ok := strings.CutSuffix(n, "/goal"); ok && strings.HasSuffix(t.typ, "ActionGoal") {
					names = append(names, ns)
				}
			}
		} else {
			for n := range s.actions {
				names = append(names, n)
			}
		}
		sort.Strings(names)
		return map[string]any{"action_servers": names}, true
	}
	return nil, false
}
