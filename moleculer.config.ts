/** The broker's options, built in lib/launch/broker-options.ts from the configuration. */
export { brokerOptions } from "./lib/launch/broker-options";
