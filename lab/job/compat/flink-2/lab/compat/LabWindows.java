package lab.compat;

import java.time.Duration;

import org.apache.flink.streaming.api.windowing.assigners.TumblingEventTimeWindows;

/** Flink 2.x: window sizes are java.time.Duration (the Time class is gone). */
public final class LabWindows {
    private LabWindows() {}

    public static TumblingEventTimeWindows tumblingEventTime(long seconds) {
        return TumblingEventTimeWindows.of(Duration.ofSeconds(seconds));
    }
}
