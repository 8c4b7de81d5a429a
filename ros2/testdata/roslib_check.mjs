// An independent rosbridge client (roslib 2.x, the RobotWebTools library)
// against the fake server: run by TestRoslibAgainstFake when MHP_PEER_ROSLIB is set.
import * as ROSLIB from 'roslib';

const ros = new ROSLIB.Ros({ url: process.argv[2] });
const seen = new Set();
const out = (kind, value) => {
  console.log(JSON.stringify({ kind, value }));
  seen.add(kind);
  if (['topic', 'service', 'feedback', 'result', 'aborted'].every((k) => seen.has(k))) {
    ros.close();
    process.exit(0);
  }
};
setTimeout(() => { console.log(JSON.stringify({ kind: 'timeout', value: [...seen] })); process.exit(2); }, 10000);
ros.on('error', (e) => { console.log(JSON.stringify({ kind: 'error', value: String(e) })); process.exit(1); });
ros.on('connection', () => {
  new ROSLIB.Topic({ ros, name: '/chatter', messageType: 'std_msgs/msg/String' })
    .subscribe((m) => out('topic', m.data));
  new ROSLIB.Topic({ ros, name: '/from_node', messageType: 'std_msgs/msg/String' })
    .publish({ data: 'hi/there' });
  new ROSLIB.Service({ ros, name: '/add', serviceType: 'example_interfaces/srv/AddTwoInts' })
    .callService({ a: 2, b: 3 }, (r) => out('service', r.sum), (e) => out('service_error', String(e)));
  new ROSLIB.Action({ ros, name: '/fib', actionType: 'example_interfaces/action/Fibonacci' })
    .sendGoal({ order: 3 }, (r) => out('result', r.sequence), (f) => out('feedback', f.partial), (e) => out('failed', String(e)));
  new ROSLIB.Action({ ros, name: '/fail', actionType: 'example_interfaces/action/Fibonacci' })
    .sendGoal({ order: 3 }, (r) => out('unexpected', r), undefined, (e) => out('aborted', String(e)));
});
