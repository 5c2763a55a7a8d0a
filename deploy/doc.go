// Package deploy has no code of its own: its tests keep the deployment files
// honest. They parse s.yaml (Serverless Devs, fc3 component) and template.yml
// (ROS, ALIYUN::FC3::*) and check, case by named case, that both agree with
// the code (every variable config.Load reads is set or explicitly left to the
// platform, the custom-runtime port and command, the trigger events the
// handler accepts, retries against MAX_ATTEMPTS, the timeout against the model
// timeout, a least-privilege role) and with each other; that the checker
// fails on a drifted copy; and that scripts/build.sh produces the zip FC runs.
package deploy
