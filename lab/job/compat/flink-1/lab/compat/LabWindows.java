package lab.compat;

import org.apache.flink.streaming.api.windowing.assigners.TumblingEventTimeWindows;
import org.apache.flink.streaming.api.windowing.time.Time;

/** Flink 1.x: window sizes are org.apache.flink.streaming.api.windowing.time.Time (Duration only from 1.19). */
public final class LabWindows {
    private LabWindows() {}

    public static TumblingEventTimeWindows tumblingEventTime(long seconds) {
        return TumblingEventTimeWindows.of(Time.seconds(seconds));
    }
}
